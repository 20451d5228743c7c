package simcluster

import (
	"reflect"
	"testing"

	longhornclient "github.com/longhorn/longhorn-manager/client"
	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestVolumeRequest checks the volume asked of Longhorn's API for a claim
// and its class against what Longhorn v1.12.0's CreateVolume and
// getVolumeOptions send (csi/controller_server.go, csi/util.go and the
// cases of csi/util_test.go).
func TestVolumeRequest(t *testing.T) {
	defaults := func(edit func(*longhornclient.Volume)) *longhornclient.Volume {
		v := &longhornclient.Volume{
			StaleReplicaTimeout: 2880, AccessMode: string(lhv1.AccessModeReadWriteOnce),
			DataEngine: string(lhv1.DataEngineTypeV1), RevisionCounterDisabled: true,
		}
		if edit != nil {
			edit(v)
		}
		return v
	}
	rwo := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	rwx := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
	tests := []struct {
		name    string
		modes   []corev1.PersistentVolumeAccessMode
		params  map[string]string
		want    *longhornclient.Volume
		wantErr bool
	}{
		{"defaults", rwo, nil, defaults(nil), false},
		{"class parameters", rwo, map[string]string{
			"numberOfReplicas": "2", "dataLocality": "best-effort", "diskSelector": "ssd,fast", "nodeSelector": "storage",
			"backingImage": "", "staleReplicaTimeout": "30", "disableRevisionCounter": "false", "frontend": "blockdev",
		}, defaults(func(v *longhornclient.Volume) {
			v.NumberOfReplicas, v.DataLocality = 2, "best-effort"
			v.DiskSelector, v.NodeSelector = []string{"ssd", "fast"}, []string{"storage"}
			v.StaleReplicaTimeout, v.RevisionCounterDisabled, v.Frontend = 30, false, "blockdev"
		}), false},
		{"zero replicas leave Longhorn's default", rwo, map[string]string{"numberOfReplicas": "0"}, defaults(nil), false},
		{"ReadWriteMany is shared", rwx, nil, defaults(func(v *longhornclient.Volume) { v.AccessMode = "rwx" }), false},
		{"migratable with ReadWriteMany", rwx, map[string]string{"migratable": "true"},
			defaults(func(v *longhornclient.Volume) { v.AccessMode, v.Migratable = "rwx", true }), false},
		{"migratable needs ReadWriteMany", rwo, map[string]string{"migratable": "true"}, defaults(nil), false},
		{"ReadWriteOncePod is exclusive", []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod}, nil,
			defaults(func(v *longhornclient.Volume) { v.AccessMode = "rwop" }), false},
		{"dataEngine", rwo, map[string]string{"dataEngine": "v2"}, defaults(func(v *longhornclient.Volume) { v.DataEngine = "v2" }), false},
		{"shared and exclusive", rwx, map[string]string{"exclusive": "true"}, nil, true},
		{"replica count", rwo, map[string]string{"numberOfReplicas": "two"}, nil, true},
		{"negative replica count", rwo, map[string]string{"numberOfReplicas": "-1"}, nil, true},
		{"data locality", rwo, map[string]string{"dataLocality": "nearby"}, nil, true},
		{"migratable", rwx, map[string]string{"migratable": "maybe"}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pvc := &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{AccessModes: tt.modes}}
			params := csiParameters(&storagev1.StorageClass{Parameters: tt.params})
			got, err := volumeRequest(pvc, params)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("volumeRequest(%v) = %+v; want an error", tt.params, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("volumeRequest(%v) =\n%+v\nwant\n%+v", tt.params, got, tt.want)
			}
		})
	}
}

// TestAccessModesSupported checks that a ReadOnlyMany claim is refused, as
// Longhorn's driver refuses MULTI_NODE_READER_ONLY.
func TestAccessModesSupported(t *testing.T) {
	for mode, ok := range map[corev1.PersistentVolumeAccessMode]bool{
		corev1.ReadWriteOnce: true, corev1.ReadWriteMany: true, corev1.ReadWriteOncePod: true, corev1.ReadOnlyMany: false,
	} {
		pvc := &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{mode}}}
		if err := accessModesSupported(pvc); (err == nil) != ok {
			t.Errorf("accessModesSupported(%s) = %v", mode, err)
		}
	}
}

// TestRequestedSize checks the size Longhorn's CreateVolume asks for: at
// least 10 MiB, rounded up to 2 MiB.
func TestRequestedSize(t *testing.T) {
	for _, tt := range []struct {
		request string
		want    int64
	}{{"1Mi", 10 << 20}, {"1001Mi", 1002 << 20}, {"100Gi", 100 << 30}} {
		pvc := &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(tt.request)}}}}
		if got, err := requestedSize(pvc); err != nil || got != tt.want {
			t.Errorf("requestedSize(%s) = %d, %v; want %d", tt.request, got, err, tt.want)
		}
	}
	if _, err := requestedSize(&corev1.PersistentVolumeClaim{}); err == nil {
		t.Error("requestedSize accepted a claim that requests no storage")
	}
}

// TestCSIParameters checks that the external provisioner's own parameters
// are not sent to the driver.
func TestCSIParameters(t *testing.T) {
	got := csiParameters(&storagev1.StorageClass{Parameters: map[string]string{
		"numberOfReplicas": "1", "csi.storage.k8s.io/fstype": "xfs",
	}})
	if want := map[string]string{"numberOfReplicas": "1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("csiParameters = %v; want %v", got, want)
	}
}
