package simcluster

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kubernetes-csi/external-provisioner/v6/pkg/capacity"
	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
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

// csiProvisioner plays the Longhorn CSI driver's CreateVolume and
// DeleteVolume behind the external-provisioner, built on
// sig-storage-lib-external-provisioner as the CSI external-provisioner is:
// the library provisions the claims the PV controller hands to
// driver.longhorn.io (their volume.kubernetes.io/storage-provisioner
// annotation; with WaitForFirstConsumer only once kube-scheduler selected a
// node), calling Provision and storing the PersistentVolume it returns with
// the claim's reference, for the PV controller to bind; and for a Released
// PersistentVolume of reclaim policy Delete it calls Delete, then deletes
// the PersistentVolume. Binding, releasing and the protection finalizers
// are kube-controller-manager's.
type csiProvisioner struct {
	sim    *sim
	client kubernetes.Interface
	// capacity publishes storage capacity beside the provisioner, as the
	// external-provisioner does with --enable-capacity.
	capacity *capacityPublisher
	// api is Longhorn's REST API, which volumes are created and deleted
	// through.
	api *longhornAPI
}

var (
	_ controller.Provisioner      = &csiProvisioner{}
	_ controller.BlockProvisioner = &csiProvisioner{}
	_ controller.Qualifier        = &csiProvisioner{}
)

func (p *csiProvisioner) setup(mgr ctrl.Manager) error {
	cs, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("creating the external provisioner's client: %w", err)
	}
	p.client = cs
	p.api = &longhornAPI{url: p.sim.longhornAPI}
	return mgr.Add(p)
}

// Start runs the external provisioner until ctx ends, then waits for its
// workers.
func (p *csiProvisioner) Start(ctx context.Context) error {
	ctx = klog.NewContext(ctx, ctrl.LoggerFrom(ctx).WithName("simcluster-csi-provisioner"))
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[string](provisionRetryStart, provisionRetryMax)
	var workers sync.WaitGroup
	defer workers.Wait()
	capacityController, err := p.capacity.start(ctx, &workers)
	if err != nil {
		return err
	}
	pc := controller.NewProvisionController(ctx, p.client, CSIDriver, capacity.NewProvisionWrapper(p, capacityController),
		controller.LeaderElection(false),
		controller.VolumeName(VolumeName),
		controller.RateLimiter(limiter),
		controller.CreateProvisionedPVLimiter(workqueue.NewTypedItemExponentialFailureRateLimiter[string](provisionRetryStart, provisionRetryMax)),
		controller.FailedProvisionThreshold(0),
		controller.FailedDeleteThreshold(0),
	)
	pc.ControllerWaitGroup(&workers)
	pc.Run(ctx)
	return nil
}

// Provision creates the claim's Longhorn Volume and returns its
// PersistentVolume, as the Longhorn CSI driver's CreateVolume does
// (provisioner_api.go): the volume is created through Longhorn's API, whose
// VolumeManager.Create and admission webhooks check it and fill in
// Longhorn's defaults, and the PersistentVolume has the size Longhorn
// answered; a refusal is the error, with Longhorn's message, that the
// external provisioner records and retries. A Volume that exists (an
// earlier call's) is kept.
func (p *csiProvisioner) Provision(ctx context.Context, opts controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	name := VolumeName(opts.PVC)
	if name != opts.PVName {
		return nil, controller.ProvisioningFinished, fmt.Errorf("claim %s/%s: the PersistentVolume is named %s, its volume %s",
			opts.PVC.Namespace, opts.PVC.Name, opts.PVName, name)
	}
	vol, err := p.api.createVolume(ctx, opts.PVC, opts.StorageClass, name)
	if err != nil {
		return nil, provisioningState(err), err
	}
	if vol.Name != name {
		return nil, controller.ProvisioningFinished, fmt.Errorf("claim %s/%s: Longhorn's API created volume %s, not %s",
			opts.PVC.Namespace, opts.PVC.Name, vol.Name, name)
	}
	klog.FromContext(ctx).Info("Provisioned the claim", "claim", klog.KObj(opts.PVC), "volume", vol.Name,
		"size", vol.Spec.Size, "selectedNode", opts.SelectedNodeName)
	return PersistentVolumeFor(opts.PVC, opts.StorageClass, vol), controller.ProvisioningFinished, nil
}

// Delete deletes the Longhorn Volume of a PersistentVolume, as the Longhorn
// CSI driver's DeleteVolume does: through Longhorn's API, waiting until the
// volume is gone; Longhorn removes its replicas. A volume that is gone already is deleted.
func (p *csiProvisioner) Delete(ctx context.Context, pv *corev1.PersistentVolume) error {
	name := volumeHandle(pv)
	if name == "" {
		return &controller.IgnoredError{Reason: "not a Longhorn volume"}
	}
	if err := p.api.deleteVolume(ctx, name); err != nil {
		return err // the driver's answer, as the external provisioner returns it
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

// PersistentVolumeFor returns the PersistentVolume the external
// provisioner makes of the Longhorn CSI driver's volume vol for a claim of
// class: vol's size, the claim's access modes and volume mode, the class's
// name, reclaim policy (Delete by default) and mount options, and the CSI
// source naming vol. The external provisioner adds the claim reference and
// the provisioned-by annotation before it stores it.
func PersistentVolumeFor(pvc *corev1.PersistentVolumeClaim, class *storagev1.StorageClass, vol *lhv1.Volume) *corev1.PersistentVolume {
	reclaim := corev1.PersistentVolumeReclaimDelete
	if class.ReclaimPolicy != nil {
		reclaim = *class.ReclaimPolicy
	}
	fsType := class.Parameters["fsType"]
	if fsType == "" {
		fsType = "ext4"
	}
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: vol.Name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(vol.Spec.Size, resource.BinarySI)},
			AccessModes:                   pvc.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: reclaim,
			StorageClassName:              class.Name,
			VolumeMode:                    pvc.Spec.VolumeMode,
			MountOptions:                  class.MountOptions,
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: CSIDriver, VolumeHandle: vol.Name, FSType: fsType, VolumeAttributes: class.Parameters,
			}},
		},
	}
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
