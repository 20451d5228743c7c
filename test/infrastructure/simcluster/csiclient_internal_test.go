package simcluster

import (
	"errors"
	"reflect"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

// The capability asked for each access mode, as the external-provisioner
// asks it of a driver that advertises SINGLE_NODE_MULTI_WRITER (Longhorn's)
// and of one that does not; block or mount by the volume mode.
func TestCSIVolumeCapability(t *testing.T) {
	snmw := map[csi.ControllerServiceCapability_RPC_Type]bool{csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER: true}
	for _, tt := range []struct {
		mode      corev1.PersistentVolumeAccessMode
		caps      map[csi.ControllerServiceCapability_RPC_Type]bool
		want      csi.VolumeCapability_AccessMode_Mode
		wantError bool
	}{
		{corev1.ReadWriteOnce, snmw, csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER, false},
		{corev1.ReadWriteOnce, nil, csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, false},
		{corev1.ReadWriteOncePod, snmw, csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER, false},
		{corev1.ReadWriteMany, snmw, csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER, false},
		{corev1.ReadOnlyMany, snmw, csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY, false},
		{"Sometimes", snmw, 0, true},
	} {
		got, err := csiVolumeCapability([]corev1.PersistentVolumeAccessMode{tt.mode}, nil, "xfs", []string{"noatime"}, tt.caps)
		if tt.wantError {
			if err == nil {
				t.Errorf("%s: %v; want an error", tt.mode, got)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tt.mode, err)
		}
		if got.GetAccessMode().GetMode() != tt.want || got.GetMount().GetFsType() != "xfs" || !reflect.DeepEqual(got.GetMount().GetMountFlags(), []string{"noatime"}) {
			t.Errorf("%s (driver capabilities %v): %v; want mode %s, mount xfs noatime", tt.mode, tt.caps, got, tt.want)
		}
	}
	got, err := csiVolumeCapability([]corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, ptr.To(corev1.PersistentVolumeBlock), "ext4", nil, snmw)
	if err != nil || got.GetBlock() == nil || got.GetMount() != nil {
		t.Errorf("a block volume's capability: %v, %v; want block", got, err)
	}
}

// The class parameters sent to CreateVolume lose the external
// provisioner's own; the filesystem is the class's or ext4.
func TestCSIParametersAndFSType(t *testing.T) {
	class := &storagev1.StorageClass{Parameters: map[string]string{
		"numberOfReplicas": "1", "csi.storage.k8s.io/fstype": "xfs",
	}}
	if got, want := csiParameters(class), map[string]string{"numberOfReplicas": "1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("csiParameters = %v; want %v", got, want)
	}
	for _, tt := range []struct {
		params  map[string]string
		want    string
		wantErr bool
	}{
		{nil, "ext4", false},
		{map[string]string{"fsType": "xfs"}, "xfs", false},
		{map[string]string{"csi.storage.k8s.io/fstype": "xfs"}, "xfs", false},
		{map[string]string{"fsType": "xfs", "csi.storage.k8s.io/fstype": "ext4"}, "", true},
	} {
		got, err := csiFSType(&storagev1.StorageClass{Parameters: tt.params})
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("csiFSType(%v) = %q, %v; want %q (error %v)", tt.params, got, err, tt.want, tt.wantErr)
		}
	}
}

// A failed CreateVolume that may still be running is retried in the
// background; any other is finished.
func TestProvisioningState(t *testing.T) {
	for err, want := range map[error]controller.ProvisioningState{
		status.Error(codes.DeadlineExceeded, "x"): controller.ProvisioningInBackground,
		status.Error(codes.Unavailable, "x"):      controller.ProvisioningInBackground,
		status.Error(codes.Internal, "x"):         controller.ProvisioningFinished,
		status.Error(codes.InvalidArgument, "x"):  controller.ProvisioningFinished,
		errors.New("no gRPC status"):              controller.ProvisioningInBackground,
	} {
		if got := provisioningState(err); got != want {
			t.Errorf("provisioningState(%v) = %s; want %s", err, got, want)
		}
	}
}
