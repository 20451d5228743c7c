package ledger

import (
	"reflect"
	"testing"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What Longhorn persisted on a disk is what its node controller adds to the
// disk's storageScheduled: each replica whose spec.diskID names the disk at
// its own spec.volumeSize, a shared data directory once, nothing of an
// unscheduled replica; and each backing image whose diskFileSpecMap lists
// the disk at its status.realSize (0 while it is not known).
func TestPersistedByDisk(t *testing.T) {
	replica := func(name, volume string, size int64, disk, dir string) lhv1.Replica {
		r := lhv1.Replica{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "longhorn-system"}}
		r.Spec.VolumeName, r.Spec.VolumeSize, r.Spec.DiskID, r.Spec.DataDirectoryName = volume, size, disk, dir
		return r
	}
	image := func(name string, realSize int64, disks ...string) lhv1.BackingImage {
		bi := lhv1.BackingImage{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "longhorn-system"}}
		bi.Spec.DiskFileSpecMap = map[string]*lhv1.BackingImageDiskFileSpec{}
		for _, d := range disks {
			bi.Spec.DiskFileSpecMap[d] = &lhv1.BackingImageDiskFileSpec{}
		}
		bi.Status.Size, bi.Status.RealSize = 5*Gi, realSize
		return bi
	}
	replicas := []lhv1.Replica{
		replica("pvc-a-r-5b6c7d8e", "pvc-a", 10*Gi, "uuid-0", "pvc-a-1f2e3d4c"),
		replica("pvc-a-r-0a1b2c3d", "pvc-a", 10*Gi, "uuid-0", "pvc-a-1f2e3d4c"), // its migration clone
		replica("pvc-b-r-11111111", "pvc-b", 5*Gi, "uuid-0", "pvc-b-22222222"),
		replica("pvc-a-r-33333333", "pvc-a", 10*Gi, "uuid-1", "pvc-a-44444444"),
		replica("pvc-c-r-55555555", "pvc-c", 7*Gi, "", ""), // not scheduled yet
	}
	images := []lhv1.BackingImage{
		image("default-image-x7k2p", 3*Gi, "uuid-0", "uuid-2"), // a qcow2 image: its file is smaller than its size
		image("default-image-q9w8e", 0, "uuid-1"),              // its real size not known yet
	}
	want := map[string]Persisted{
		"uuid-0": {
			Replicas:      map[string]int64{"pvc-a-r-0a1b2c3d": 10 * Gi, "pvc-b-r-11111111": 5 * Gi},
			BackingImages: map[string]int64{"default-image-x7k2p": 3 * Gi},
			Shared:        map[string]string{"pvc-a-r-5b6c7d8e": "pvc-a-r-0a1b2c3d"},
		},
		"uuid-1": {Replicas: map[string]int64{"pvc-a-r-33333333": 10 * Gi}, BackingImages: map[string]int64{"default-image-q9w8e": 0}},
		"uuid-2": {Replicas: map[string]int64{}, BackingImages: map[string]int64{"default-image-x7k2p": 3 * Gi}},
	}
	got := PersistedByDisk(replicas, images, nil)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("PersistedByDisk:\n got %+v\nwant %+v", got, want)
	}
	for disk, total := range map[string]int64{"uuid-0": 18 * Gi, "uuid-1": 10 * Gi, "uuid-2": 3 * Gi, "uuid-9": 0} {
		if got := got[disk].Total(); got != total {
			t.Errorf("%s: Total = %s, want %s", disk, Bytes(got), Bytes(total))
		}
	}

	// The replica whose ledger entry counts a shared directory is the one
	// counted.
	hasEntry := func(r *lhv1.Replica) bool { return r.Name == "pvc-a-r-5b6c7d8e" }
	on := PersistedByDisk(replicas, images, hasEntry)["uuid-0"]
	if want := map[string]int64{"pvc-a-r-5b6c7d8e": 10 * Gi, "pvc-b-r-11111111": 5 * Gi}; !reflect.DeepEqual(on.Replicas, want) {
		t.Errorf("with an entry for pvc-a-r-5b6c7d8e: replicas %v, want %v", on.Replicas, want)
	}
	if want := map[string]string{"pvc-a-r-0a1b2c3d": "pvc-a-r-5b6c7d8e"}; !reflect.DeepEqual(on.Shared, want) {
		t.Errorf("with an entry for pvc-a-r-5b6c7d8e: shared %v, want %v", on.Shared, want)
	}
}
