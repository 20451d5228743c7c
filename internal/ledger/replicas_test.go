package ledger

import (
	"reflect"
	"testing"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// One data directory on one disk is counted once: Longhorn's v1 live
// migration and live engine upgrade clone a replica into the same disk and
// data directory (duplicateReplica copies the spec), and the ledger counts
// the directory under the replica that has an entry.
func TestSharedData(t *testing.T) {
	replica := func(name, volume, disk, dir string) lhv1.Replica {
		r := lhv1.Replica{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "longhorn-system"}}
		r.Spec.VolumeName, r.Spec.VolumeSize, r.Spec.DiskID, r.Spec.DataDirectoryName = volume, 10*Gi, disk, dir
		return r
	}
	original := replica("pvc-a-r-5b6c7d8e", "pvc-a", "uuid-0", "pvc-a-1f2e3d4c")
	clone := replica("pvc-a-r-0a1b2c3d", "pvc-a", "uuid-0", "pvc-a-1f2e3d4c")
	for _, tc := range []struct {
		name     string
		replicas []lhv1.Replica
		entries  []string
		want     map[string]string
	}{
		{"a clone is counted with the replica that has the entry",
			[]lhv1.Replica{original, clone}, []string{original.Name}, map[string]string{clone.Name: original.Name}},
		{"once the original is gone the clone takes the entry",
			[]lhv1.Replica{original, clone}, []string{clone.Name}, map[string]string{original.Name: clone.Name}},
		{"without entries the first by name counts",
			[]lhv1.Replica{original, clone}, nil, map[string]string{original.Name: clone.Name}},
		{"with two entries the first by name counts",
			[]lhv1.Replica{original, clone}, []string{original.Name, clone.Name}, map[string]string{original.Name: clone.Name}},
		{"three in one directory",
			[]lhv1.Replica{original, clone, replica("pvc-a-r-ffffffff", "pvc-a", "uuid-0", "pvc-a-1f2e3d4c")}, []string{original.Name},
			map[string]string{clone.Name: original.Name, "pvc-a-r-ffffffff": original.Name}},
		{"replicas of one volume in other directories are their own",
			[]lhv1.Replica{original, replica("pvc-a-r-2", "pvc-a", "uuid-0", "pvc-a-99999999"), replica("pvc-a-r-3", "pvc-a", "uuid-1", "pvc-a-1f2e3d4c")},
			nil, map[string]string{}},
		{"another volume's replica in a directory of the same name is its own",
			[]lhv1.Replica{original, replica("pvc-b-r-1", "pvc-b", "uuid-0", "pvc-a-1f2e3d4c")}, nil, map[string]string{}},
		{"unscheduled replicas share nothing",
			[]lhv1.Replica{replica("pvc-a-r-2", "pvc-a", "", ""), replica("pvc-a-r-3", "pvc-a", "", "")}, nil, map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			entries := map[string]bool{}
			for _, e := range tc.entries {
				entries[e] = true
			}
			got := SharedData(tc.replicas, func(r *lhv1.Replica) bool { return entries[r.Name] })
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("SharedData = %v, want %v", got, tc.want)
			}
		})
	}
	if !SharesData(&original, &clone) || SharesData(&original, &original) {
		t.Errorf("SharesData: a clone shares, a replica does not share with itself")
	}
}
