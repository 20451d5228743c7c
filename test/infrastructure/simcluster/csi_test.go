package simcluster_test

import (
	"reflect"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/longhorn/diskschedule/test/infrastructure/simcluster"
)

func TestVolumeFor(t *testing.T) {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "app", UID: "1234"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			VolumeMode:  ptr.To(corev1.PersistentVolumeFilesystem),
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("100Gi")}},
		},
	}
	class := &storagev1.StorageClass{
		ObjectMeta:  metav1.ObjectMeta{Name: "longhorn"},
		Provisioner: simcluster.CSIDriver,
		Parameters: map[string]string{
			"numberOfReplicas": "2", "dataLocality": "best-effort", "nodeSelector": "storage, fast", "diskSelector": "ssd", "backingImage": "img",
		},
		ReclaimPolicy: ptr.To(corev1.PersistentVolumeReclaimRetain),
	}
	vol, err := simcluster.VolumeFor(pvc, class, "longhorn-system")
	if err != nil {
		t.Fatal(err)
	}
	want := lhv1.VolumeSpec{
		Size: 100 << 30, NumberOfReplicas: 2, DataLocality: lhv1.DataLocalityBestEffort,
		NodeSelector: []string{"storage", "fast"}, DiskSelector: []string{"ssd"}, BackingImage: "img",
		Frontend: lhv1.VolumeFrontendBlockDev, RestoreVolumeRecurringJob: lhv1.RestoreVolumeRecurringJobDefault,
		StaleReplicaTimeout: 2880, Image: simcluster.EngineImage, RevisionCounterDisabled: true,
		UnmapMarkSnapChainRemoved:   lhv1.UnmapMarkSnapChainRemovedIgnored,
		ReplicaSoftAntiAffinity:     lhv1.ReplicaSoftAntiAffinityDefault,
		ReplicaZoneSoftAntiAffinity: lhv1.ReplicaZoneSoftAntiAffinityDefault,
		ReplicaDiskSoftAntiAffinity: lhv1.ReplicaDiskSoftAntiAffinityDefault,
		AccessMode:                  lhv1.AccessModeReadWriteOnce, ReplicaAutoBalance: lhv1.ReplicaAutoBalanceIgnored,
		SnapshotDataIntegrity: lhv1.SnapshotDataIntegrityIgnored, BackupCompressionMethod: lhv1.BackupCompressionMethodLz4,
		BackupBlockSize: 2 << 20, DataEngine: lhv1.DataEngineTypeV1, SnapshotMaxCount: 250,
		FreezeFilesystemForSnapshot: lhv1.FreezeFilesystemForSnapshotDefault, BackupTargetName: "default",
		OfflineRebuilding: lhv1.VolumeOfflineRebuildingIgnored,
	}
	if vol.Name != "pvc-1234" || vol.Namespace != "longhorn-system" || !reflect.DeepEqual(vol.Spec, want) {
		t.Errorf("VolumeFor = %s/%s\n%+v\nwant longhorn-system/pvc-1234\n%+v", vol.Namespace, vol.Name, vol.Spec, want)
	}
	if vol.Labels[simcluster.LabelVolume] != vol.Name {
		t.Errorf("volume labels = %v", vol.Labels)
	}

	// The PersistentVolume of Longhorn's CreateVolume answer.
	answer := &csi.Volume{VolumeId: vol.Name, CapacityBytes: 100 << 30, VolumeContext: map[string]string{"numberOfReplicas": "2"}}
	pv := simcluster.PersistentVolumeFor(pvc, class, vol.Name, "xfs", answer, "1-2-"+simcluster.CSIDriver)
	if pv.Name != vol.Name || pv.Spec.CSI == nil || pv.Spec.CSI.Driver != simcluster.CSIDriver || pv.Spec.CSI.VolumeHandle != vol.Name || pv.Spec.CSI.FSType != "xfs" ||
		!reflect.DeepEqual(pv.Spec.CSI.VolumeAttributes, map[string]string{"numberOfReplicas": "2", "storage.kubernetes.io/csiProvisionerIdentity": "1-2-" + simcluster.CSIDriver}) {
		t.Errorf("PersistentVolumeFor CSI source = %+v", pv.Spec.CSI)
	}
	if pv.Spec.ClaimRef != nil {
		t.Errorf("claimRef = %+v; the external provisioner sets it", pv.Spec.ClaimRef)
	}
	capacity := pv.Spec.Capacity[corev1.ResourceStorage]
	if capacity.Cmp(resource.MustParse("100Gi")) != 0 || pv.Spec.StorageClassName != "longhorn" ||
		pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain || !reflect.DeepEqual(pv.Spec.AccessModes, pvc.Spec.AccessModes) {
		t.Errorf("PersistentVolumeFor spec = %+v", pv.Spec)
	}

	// Defaults: three replicas, locality disabled, empty selectors, reclaim
	// Delete; the size rounded up to 2 MiB.
	class.Parameters, class.ReclaimPolicy = nil, nil
	pvc.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("1001Mi")
	vol, err = simcluster.VolumeFor(pvc, class, "longhorn-system")
	if err != nil {
		t.Fatal(err)
	}
	if vol.Spec.NumberOfReplicas != 3 || vol.Spec.DataLocality != lhv1.DataLocalityDisabled ||
		vol.Spec.NodeSelector == nil || len(vol.Spec.NodeSelector) != 0 || vol.Spec.Size != 1002<<20 {
		t.Errorf("default volume spec = %+v", vol.Spec)
	}
	// A block claim's has no fsType; an answer without capacity is the
	// claim's request.
	pvc.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeBlock)
	pv = simcluster.PersistentVolumeFor(pvc, class, vol.Name, "ext4", &csi.Volume{VolumeId: vol.Name}, "id")
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		t.Errorf("default reclaim policy = %s", pv.Spec.PersistentVolumeReclaimPolicy)
	}
	if capacity := pv.Spec.Capacity[corev1.ResourceStorage]; pv.Spec.CSI.FSType != "" || capacity.Cmp(resource.MustParse("1001Mi")) != 0 {
		t.Errorf("a block claim's PersistentVolume: fsType %q, capacity %s", pv.Spec.CSI.FSType, capacity.String())
	}
	pvc.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeFilesystem)

	// A ReadWriteMany claim's volume is shared (rwx), and migratable when
	// its class says so; a ReadWriteOnce claim's is never migratable.
	class.Parameters = map[string]string{"migratable": "true"}
	for _, tt := range []struct {
		mode           corev1.PersistentVolumeAccessMode
		wantAccess     lhv1.AccessMode
		wantMigratable bool
	}{
		{corev1.ReadWriteMany, lhv1.AccessModeReadWriteMany, true},
		{corev1.ReadWriteOnce, lhv1.AccessModeReadWriteOnce, false},
	} {
		pvc.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{tt.mode}
		vol, err := simcluster.VolumeFor(pvc, class, "longhorn-system")
		if err != nil {
			t.Fatal(err)
		}
		if vol.Spec.AccessMode != tt.wantAccess || vol.Spec.Migratable != tt.wantMigratable {
			t.Errorf("a %s claim of a migratable class: access mode %s, migratable %t; want %s, %t",
				tt.mode, vol.Spec.AccessMode, vol.Spec.Migratable, tt.wantAccess, tt.wantMigratable)
		}
	}
	pvc.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}

	for _, params := range []map[string]string{{"numberOfReplicas": "two"}, {"dataLocality": "nearby"}, {"migratable": "maybe"}} {
		class.Parameters = params
		if _, err := simcluster.VolumeFor(pvc, class, "longhorn-system"); err == nil {
			t.Errorf("VolumeFor accepted %v", params)
		}
	}
	class.Parameters = nil
	pvc.Spec.Resources.Requests = nil
	if _, err := simcluster.VolumeFor(pvc, class, "longhorn-system"); err == nil {
		t.Error("VolumeFor accepted a claim that requests no storage")
	}
}
