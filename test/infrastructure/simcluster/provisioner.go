package simcluster

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

// Defaults of Longhorn v1.12's CSI driver and volume admission webhook.
const (
	// sizeAlignment is what Longhorn rounds volume sizes up to (2 MiB).
	sizeAlignment = int64(2 << 20)
	// defaultStaleReplicaTimeout is the CSI driver's default, in minutes.
	defaultStaleReplicaTimeout = 2880
	// defaultSnapshotMaxCount is the snapshot-max-count setting's default.
	defaultSnapshotMaxCount = 250
	// defaultBackupBlockSize is the default-backup-block-size setting's default, in bytes.
	defaultBackupBlockSize = int64(2 << 20)
	// defaultBackupTarget is the backup target every volume names.
	defaultBackupTarget = "default"
)

// Retries of the external provisioner: as the CSI external-provisioner's
// --retry-interval-start and --retry-interval-max default, and without
// giving up.
const (
	provisionRetryStart = time.Second
	provisionRetryMax   = 5 * time.Minute
)

// provisionWorkers is the external-provisioner's --worker-threads default:
// how many claims it provisions or volumes it deletes at once, each
// waiting for Longhorn's CreateVolume or DeleteVolume.
const provisionWorkers = 100

// csiProvisioner is the CSI external-provisioner in front of Longhorn's CSI
// driver, built on sig-storage-lib-external-provisioner as the
// external-provisioner is: the library provisions the claims the PV
// controller hands to driver.longhorn.io (their
// volume.kubernetes.io/storage-provisioner annotation; with
// WaitForFirstConsumer only once kube-scheduler selected a node), calling
// Provision and storing the PersistentVolume it returns with the claim's
// reference, for the PV controller to bind; and for a Released
// PersistentVolume of reclaim policy Delete it calls Delete, then deletes
// the PersistentVolume. Provision and Delete call Longhorn v1.12.0's own
// CSI controller server (CreateVolume, DeleteVolume) over its socket, with
// the requests the external-provisioner builds. Binding, releasing and the
// protection finalizers are kube-controller-manager's.
type csiProvisioner struct {
	sim    *sim
	client kubernetes.Interface
	// withCapacity is what the library calls: the storage capacity
	// published beside the provisioner (capacityPublisher) refreshed after
	// each provisioning, as the external-provisioner does with
	// --enable-capacity.
	withCapacity capacityWrapped
	// identity is the provisioner's identity, which each
	// PersistentVolume's volume attributes carry (the
	// external-provisioner's: its start time, a random number and the
	// driver's name).
	identity string
}

// Provision creates the claim's volume with Longhorn's CSI CreateVolume,
// asked as the external-provisioner asks it (CreateVolumeRequest): the
// PersistentVolume's name, the claim's request as the required bytes, one
// capability per access mode of the claim, and the class's parameters
// without the external-provisioner's own. Longhorn's driver turns them
// into a volume of Longhorn's API (whose VolumeManager.Create and
// admission webhooks check it and fill in Longhorn's defaults). The
// PersistentVolume is built of its answer (PersistentVolumeFor). A refusal
// is the driver's gRPC error, which the library records and retries, in
// the state the external-provisioner gives it (provisioningState).
func (p *csiProvisioner) Provision(ctx context.Context, opts controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	name := VolumeName(opts.PVC)
	if name != opts.PVName {
		return nil, controller.ProvisioningFinished, fmt.Errorf("claim %s/%s: the PersistentVolume is named %s, its volume %s",
			opts.PVC.Namespace, opts.PVC.Name, opts.PVName, name)
	}
	driver, caps, err := p.sim.csi.client(ctx)
	if err != nil {
		return nil, controller.ProvisioningInBackground, err
	}
	fsType, err := csiFSType(opts.StorageClass)
	if err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	req := &csi.CreateVolumeRequest{
		Name:          name,
		Parameters:    csiParameters(opts.StorageClass),
		CapacityRange: &csi.CapacityRange{RequiredBytes: storageRequest(opts.PVC)},
	}
	for _, m := range opts.PVC.Spec.AccessModes {
		c, err := csiVolumeCapability([]corev1.PersistentVolumeAccessMode{m}, opts.PVC.Spec.VolumeMode, fsType, opts.StorageClass.MountOptions, caps)
		if err != nil {
			return nil, controller.ProvisioningFinished, err
		}
		req.VolumeCapabilities = append(req.VolumeCapabilities, c)
	}
	createCtx, cancel := context.WithTimeout(ctx, csiTimeout)
	defer cancel()
	rsp, err := driver.CreateVolume(createCtx, req)
	if err != nil {
		return nil, provisioningState(err), err
	}
	vol := rsp.GetVolume()
	if got := vol.GetCapacityBytes(); got != 0 && got < req.CapacityRange.RequiredBytes {
		// The external-provisioner deletes a volume smaller than asked
		// and tries again.
		capErr := fmt.Errorf("created volume capacity %v less than requested capacity %v", got, req.CapacityRange.RequiredBytes)
		delCtx, cancel := context.WithTimeout(ctx, csiTimeout)
		defer cancel()
		if _, err := driver.DeleteVolume(delCtx, &csi.DeleteVolumeRequest{VolumeId: vol.GetVolumeId()}); err != nil {
			capErr = fmt.Errorf("%w. Cleanup of volume %s failed, volume is orphaned: %v", capErr, name, err)
		}
		return nil, controller.ProvisioningInBackground, capErr
	}
	pv := PersistentVolumeFor(opts.PVC, opts.StorageClass, name, fsType, vol, p.identity)
	capacity := pv.Spec.Capacity[corev1.ResourceStorage]
	klog.FromContext(ctx).Info("Provisioned the claim", "claim", klog.KObj(opts.PVC), "volume", vol.GetVolumeId(),
		"size", capacity.Value(), "selectedNode", opts.SelectedNodeName)
	return pv, controller.ProvisioningFinished, nil
}

// Delete deletes the Longhorn volume of a PersistentVolume with Longhorn's
// CSI DeleteVolume (which deletes it through Longhorn's API and waits
// until it is gone; Longhorn removes its replicas). The driver's error is
// returned as the external-provisioner returns it.
func (p *csiProvisioner) Delete(ctx context.Context, pv *corev1.PersistentVolume) error {
	name := volumeHandle(pv)
	if name == "" {
		return &controller.IgnoredError{Reason: "not a Longhorn volume"}
	}
	driver, _, err := p.sim.csi.client(ctx)
	if err != nil {
		return err
	}
	deleteCtx, cancel := context.WithTimeout(ctx, csiTimeout)
	defer cancel()
	if _, err := driver.DeleteVolume(deleteCtx, &csi.DeleteVolumeRequest{VolumeId: name}); err != nil {
		return err
	}
	klog.FromContext(ctx).Info("Deleted the volume of a released PersistentVolume", "volume", name, "persistentVolume", pv.Name)
	return nil
}

// ShouldProvision reports that every claim handed to driver.longhorn.io is
// provisioned (the capacity controller's provision wrapper asks).
func (p *csiProvisioner) ShouldProvision(context.Context, *corev1.PersistentVolumeClaim) bool {
	return true
}

// SupportsBlock reports that Longhorn volumes may be block volumes.
func (p *csiProvisioner) SupportsBlock(context.Context) bool { return true }

// VolumeName is the name of the Longhorn Volume provisioned for a claim.
func VolumeName(pvc *corev1.PersistentVolumeClaim) string { return "pvc-" + string(pvc.UID) }

// VolumeFor returns the Longhorn Volume the Longhorn CSI driver creates for
// a claim of class, with the defaults Longhorn v1.12's API and admission
// webhook fill in: the claim's request rounded up to 2 MiB, shaped by the
// class parameters (numberOfReplicas defaults to 3, dataLocality to
// disabled), frontend blockdev, data engine v1, every policy override
// "ignored". A claim that asks for ReadWriteMany gets a shared (rwx)
// volume, which a class whose migratable parameter is true makes
// migratable, as Longhorn's CSI driver does (csi/util.go getVolumeOptions:
// migratable only with rwx).
func VolumeFor(pvc *corev1.PersistentVolumeClaim, class *storagev1.StorageClass, namespace string) (*lhv1.Volume, error) {
	size, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok || size.Sign() <= 0 {
		return nil, fmt.Errorf("claim %s/%s requests no storage", pvc.Namespace, pvc.Name)
	}
	params := class.Parameters
	name := VolumeName(pvc)
	vol := &lhv1.Volume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{LabelVolume: name}},
		Spec: lhv1.VolumeSpec{
			Size:                        roundUpSize(size.Value()),
			Frontend:                    lhv1.VolumeFrontendBlockDev,
			RestoreVolumeRecurringJob:   lhv1.RestoreVolumeRecurringJobDefault,
			DataLocality:                lhv1.DataLocalityDisabled,
			StaleReplicaTimeout:         defaultStaleReplicaTimeout,
			Image:                       EngineImage,
			BackingImage:                params[ParamBackingImage],
			DiskSelector:                splitTags(params[ParamDiskSelector]),
			NodeSelector:                splitTags(params[ParamNodeSelector]),
			RevisionCounterDisabled:     true,
			UnmapMarkSnapChainRemoved:   lhv1.UnmapMarkSnapChainRemovedIgnored,
			ReplicaSoftAntiAffinity:     lhv1.ReplicaSoftAntiAffinityDefault,
			ReplicaZoneSoftAntiAffinity: lhv1.ReplicaZoneSoftAntiAffinityDefault,
			ReplicaDiskSoftAntiAffinity: lhv1.ReplicaDiskSoftAntiAffinityDefault,
			AccessMode:                  lhv1.AccessModeReadWriteOnce,
			NumberOfReplicas:            3,
			ReplicaAutoBalance:          lhv1.ReplicaAutoBalanceIgnored,
			SnapshotDataIntegrity:       lhv1.SnapshotDataIntegrityIgnored,
			BackupCompressionMethod:     lhv1.BackupCompressionMethodLz4,
			BackupBlockSize:             defaultBackupBlockSize,
			DataEngine:                  lhv1.DataEngineTypeV1,
			SnapshotMaxCount:            defaultSnapshotMaxCount,
			FreezeFilesystemForSnapshot: lhv1.FreezeFilesystemForSnapshotDefault,
			BackupTargetName:            defaultBackupTarget,
			OfflineRebuilding:           lhv1.VolumeOfflineRebuildingIgnored,
		},
	}
	if v := params[ParamNumberOfReplicas]; v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("storage class %s: parameter %s %q is not a count", class.Name, ParamNumberOfReplicas, v)
		}
		if n > 0 { // 0 keeps Longhorn's default-replica-count, as its webhook does
			vol.Spec.NumberOfReplicas = n
		}
	}
	if v := params[ParamDataLocality]; v != "" {
		switch l := lhv1.DataLocality(v); l {
		case lhv1.DataLocalityDisabled, lhv1.DataLocalityBestEffort, lhv1.DataLocalityStrictLocal:
			vol.Spec.DataLocality = l
		default:
			return nil, fmt.Errorf("storage class %s: parameter %s %q is not a data locality", class.Name, ParamDataLocality, v)
		}
	}
	if slices.Contains(pvc.Spec.AccessModes, corev1.ReadWriteMany) {
		vol.Spec.AccessMode = lhv1.AccessModeReadWriteMany
	}
	if v := params[ParamMigratable]; v != "" {
		migratable, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("storage class %s: parameter %s %q is not a boolean", class.Name, ParamMigratable, v)
		}
		vol.Spec.Migratable = migratable && vol.Spec.AccessMode == lhv1.AccessModeReadWriteMany
	}
	return vol, nil
}

// Annotations the external-provisioner gives each PersistentVolume: the
// secret its DeleteVolume is called with (none for Longhorn's classes).
const (
	annDeletionSecretRefName      = "volume.kubernetes.io/provisioner-deletion-secret-name"
	annDeletionSecretRefNamespace = "volume.kubernetes.io/provisioner-deletion-secret-namespace"
	// csiProvisionerIdentityKey is the volume attribute naming the
	// provisioner that created the volume.
	csiProvisionerIdentityKey = "storage.kubernetes.io/csiProvisionerIdentity"
)

// PersistentVolumeFor returns the PersistentVolume named name that the CSI
// external-provisioner (identity) makes of the volume vol Longhorn's CSI
// CreateVolume answered for a claim of class: vol's capacity (the claim's
// request when vol gives none), the claim's access modes and volume mode,
// the class's name, reclaim policy (Delete by default) and mount options,
// and the CSI source with vol's ID as its handle, vol's context as its
// attributes (with the provisioner's identity) and fsType unless the
// claim is a block volume. The external provisioner adds the claim
// reference and the provisioned-by annotation before it stores it.
func PersistentVolumeFor(pvc *corev1.PersistentVolumeClaim, class *storagev1.StorageClass, name, fsType string, vol *csi.Volume, identity string) *corev1.PersistentVolume {
	reclaim := corev1.PersistentVolumeReclaimDelete
	if class.ReclaimPolicy != nil {
		reclaim = *class.ReclaimPolicy
	}
	size := vol.GetCapacityBytes()
	if size == 0 {
		size = storageRequest(pvc)
	}
	attributes := map[string]string{csiProvisionerIdentityKey: identity}
	maps.Copy(attributes, vol.GetVolumeContext())
	source := &corev1.CSIPersistentVolumeSource{Driver: CSIDriver, VolumeHandle: vol.GetVolumeId(), VolumeAttributes: attributes}
	if pvc.Spec.VolumeMode == nil || *pvc.Spec.VolumeMode != corev1.PersistentVolumeBlock {
		source.FSType = fsType
	}
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{annDeletionSecretRefName: "", annDeletionSecretRefNamespace: ""}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(size, resource.BinarySI)},
			AccessModes:                   pvc.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: reclaim,
			StorageClassName:              class.Name,
			VolumeMode:                    pvc.Spec.VolumeMode,
			MountOptions:                  class.MountOptions,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: source},
		},
	}
}

// storageRequest is the claim's storage request in bytes (0 for none).
func storageRequest(pvc *corev1.PersistentVolumeClaim) int64 {
	q := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	return q.Value()
}

// roundUpSize rounds a size up to Longhorn's 2 MiB alignment, as Longhorn's
// CSI driver does; a size that is not positive becomes 2 MiB.
func roundUpSize(size int64) int64 {
	if size <= 0 {
		return sizeAlignment
	}
	if r := size % sizeAlignment; r != 0 {
		return size - r + sizeAlignment
	}
	return size
}

// splitTags splits a comma-separated tag list, as Longhorn's class
// parameters write selectors; never nil, as Longhorn's webhook stores [].
func splitTags(s string) []string {
	out := []string{}
	for _, t := range strings.Split(s, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}
