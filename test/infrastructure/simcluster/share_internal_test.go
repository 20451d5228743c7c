package simcluster

import (
	"testing"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// TestShareAvailable: a pod of an RWX volume that is not migratable waits,
// with Longhorn's share manager controller, for what Longhorn's CSI node
// server waits for: the volume attached (on whichever node its share
// manager runs) and its share running with an endpoint. A migratable RWX
// volume is attached on its pod's node like an RWO one.
func TestShareAvailable(t *testing.T) {
	vol := func(mode lhv1.AccessMode, migratable bool, state lhv1.VolumeState, share lhv1.ShareManagerState, endpoint string) *lhv1.Volume {
		v := &lhv1.Volume{}
		v.Spec.AccessMode, v.Spec.Migratable = mode, migratable
		v.Status.State, v.Status.ShareState, v.Status.ShareEndpoint = state, share, endpoint
		return v
	}
	const ep = "nfs://10.0.0.7/pvc-1"
	for _, tc := range []struct {
		name              string
		v                 *lhv1.Volume
		shared, available bool
	}{
		{"rwo", vol(lhv1.AccessModeReadWriteOnce, false, lhv1.VolumeStateAttached, "", ""), false, false},
		{"migratable rwx", vol(lhv1.AccessModeReadWriteMany, true, lhv1.VolumeStateAttached, "", ""), false, false},
		{"rwx, share starting", vol(lhv1.AccessModeReadWriteMany, false, lhv1.VolumeStateAttached, lhv1.ShareManagerStateStarting, ""), true, false},
		{"rwx, share running without endpoint", vol(lhv1.AccessModeReadWriteMany, false, lhv1.VolumeStateAttached, lhv1.ShareManagerStateRunning, ""), true, false},
		{"rwx, detached", vol(lhv1.AccessModeReadWriteMany, false, lhv1.VolumeStateDetached, lhv1.ShareManagerStateRunning, ep), true, false},
		{"rwx, share running with endpoint", vol(lhv1.AccessModeReadWriteMany, false, lhv1.VolumeStateAttached, lhv1.ShareManagerStateRunning, ep), true, true},
	} {
		if got := sharedVolume(tc.v); got != tc.shared {
			t.Errorf("%s: shared %t, want %t", tc.name, got, tc.shared)
		}
		if got := tc.shared && shareAvailable(tc.v); got != tc.available {
			t.Errorf("%s: share available %t, want %t", tc.name, got, tc.available)
		}
	}
}
