package simlonghorn

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Annotations and finalizers the Kubernetes volume controllers use.
const (
	annProvisionedBy       = "pv.kubernetes.io/provisioned-by"
	annBindCompleted       = "pv.kubernetes.io/bind-completed"
	annBoundByController   = "pv.kubernetes.io/bound-by-controller"
	annStorageProvisioner  = "volume.kubernetes.io/storage-provisioner"
	annSelectedNode        = "volume.kubernetes.io/selected-node"
	finalizerPVCProtection = "kubernetes.io/pvc-protection"
	finalizerPVProtection  = "kubernetes.io/pv-protection"
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

// provisioner plays the Longhorn CSI driver's provisioner and resizer with
// the parts of the Kubernetes PV and protection controllers they rely on:
// it provisions and binds claims, expands them, and reclaims their volumes.
type provisioner struct {
	sim      *sim
	recorder events.EventRecorder
}

func (p *provisioner) setup(mgr ctrl.Manager) error {
	p.recorder = mgr.GetEventRecorder("simlonghorn-csi-provisioner")
	if err := ctrl.NewControllerManagedBy(mgr).Named("simlonghorn-csi-provisioner").
		For(&corev1.PersistentVolumeClaim{}).
		Watches(&storagev1.StorageClass{}, handler.EnqueueRequestsFromMapFunc(p.classClaims)).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			var out []reconcile.Request
			for _, claim := range claimNames(o.(*corev1.Pod)) {
				out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: claim}})
			}
			return out
		})).
		Watches(&lhv1.Volume{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return p.claimRequests(ctx, o.GetName())
		})).
		Watches(&lhv1.Replica{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return p.claimRequests(ctx, o.(*lhv1.Replica).Spec.VolumeName)
		})).
		Complete(reconcile.Func(p.reconcileClaim)); err != nil {
		return err
	}
	longhornPV := predicate.NewPredicateFuncs(func(o client.Object) bool {
		pv, ok := o.(*corev1.PersistentVolume)
		return ok && volumeHandle(pv) != ""
	})
	return ctrl.NewControllerManagedBy(mgr).Named("simlonghorn-csi-reclaimer").
		For(&corev1.PersistentVolume{}, builder.WithPredicates(longhornPV)).
		Watches(&corev1.PersistentVolumeClaim{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if name := o.(*corev1.PersistentVolumeClaim).Spec.VolumeName; name != "" {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: name}}}
			}
			return nil
		})).
		Complete(reconcile.Func(p.reconcilePV))
}

// claimRequests maps a Longhorn volume (by name) to the claims bound to it.
func (p *provisioner) claimRequests(ctx context.Context, volume string) []reconcile.Request {
	claims, err := p.sim.volumeClaims(ctx, volume)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Finding the claims of a volume", "volume", volume)
	}
	out := make([]reconcile.Request, 0, len(claims))
	for _, c := range claims {
		out = append(out, reconcile.Request{NamespacedName: c})
	}
	return out
}

// reconcileClaim provisions and binds an unbound claim of a Longhorn
// class, keeps a bound claim's status and size in step with its volume, and
// lets a deleted claim go once no pod uses it.
func (p *provisioner) reconcileClaim(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := p.sim.client.Get(ctx, req.NamespacedName, pvc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !pvc.DeletionTimestamp.IsZero() {
		return requeueOnConflict(p.releaseClaim(ctx, pvc))
	}
	if pvc.Spec.VolumeName != "" {
		pv := &corev1.PersistentVolume{}
		if err := p.sim.client.Get(ctx, types.NamespacedName{Name: pvc.Spec.VolumeName}, pv); err != nil {
			if apierrors.IsNotFound(err) && pvc.Annotations[annStorageProvisioner] == CSIDriver {
				// Bound a moment ago: the cache has not seen the new PersistentVolume yet.
				return reconcile.Result{RequeueAfter: time.Second}, nil
			}
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		return requeueOnConflict(p.syncBound(ctx, pvc, pv))
	}
	if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName == "" {
		return reconcile.Result{}, nil
	}
	class := &storagev1.StorageClass{}
	if err := p.sim.client.Get(ctx, types.NamespacedName{Name: *pvc.Spec.StorageClassName}, class); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err) // the class's creation brings the claim back
	}
	if class.Provisioner != CSIDriver {
		return reconcile.Result{}, nil
	}
	if class.VolumeBindingMode != nil && *class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer &&
		pvc.Annotations[annSelectedNode] == "" {
		return reconcile.Result{}, nil // kube-scheduler selects the node first
	}
	return requeueOnConflict(p.provision(ctx, pvc, class))
}

// provision creates the claim's Volume and PersistentVolume and binds them.
// Every step is idempotent: a failed step is retried from the start.
func (p *provisioner) provision(ctx context.Context, pvc *corev1.PersistentVolumeClaim, class *storagev1.StorageClass) error {
	log := ctrl.LoggerFrom(ctx)
	vol, err := VolumeFor(pvc, class, p.sim.namespace)
	if err != nil {
		p.recorder.Eventf(pvc, nil, corev1.EventTypeWarning, "ProvisioningFailed", "Provision", "%v", err)
		log.Error(err, "Cannot provision the claim", "claim", klog.KObj(pvc))
		return nil // a new claim or class brings it back
	}
	if err := p.sim.client.Create(ctx, vol); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating volume %s for claim %s/%s: %w", vol.Name, pvc.Namespace, pvc.Name, err)
	}
	pv := PersistentVolumeFor(pvc, class, vol)
	if err := p.sim.client.Create(ctx, pv); apierrors.IsAlreadyExists(err) {
		if err := p.sim.client.Get(ctx, client.ObjectKeyFromObject(pv), pv); err != nil {
			return fmt.Errorf("getting PersistentVolume %s: %w", pv.Name, err)
		}
		if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != pvc.UID {
			return fmt.Errorf("PersistentVolume %s exists for another claim", pv.Name)
		}
	} else if err != nil {
		return fmt.Errorf("creating PersistentVolume %s: %w", pv.Name, err)
	}
	if pv.Status.Phase != corev1.VolumeBound {
		base := pv.DeepCopy()
		pv.Status.Phase = corev1.VolumeBound
		if err := p.sim.client.Status().Patch(ctx, pv, client.MergeFrom(base)); err != nil {
			return fmt.Errorf("marking PersistentVolume %s Bound: %w", pv.Name, err)
		}
	}
	// Update, not patch: binding a claim that changed meanwhile is retried.
	pvc.Spec.VolumeName = pv.Name
	if pvc.Annotations == nil {
		pvc.Annotations = map[string]string{}
	}
	pvc.Annotations[annBindCompleted] = "yes"
	pvc.Annotations[annBoundByController] = "yes"
	pvc.Annotations[annStorageProvisioner] = CSIDriver
	if err := p.sim.client.Update(ctx, pvc); err != nil {
		return fmt.Errorf("binding claim %s/%s to %s: %w", pvc.Namespace, pvc.Name, pv.Name, err)
	}
	log.Info("Provisioned the claim", "claim", klog.KObj(pvc), "volume", vol.Name,
		"size", vol.Spec.Size, "numberOfReplicas", vol.Spec.NumberOfReplicas, "dataLocality", vol.Spec.DataLocality)
	return p.syncBound(ctx, pvc, pv)
}

// syncBound expands the volume of a bound claim that asks for more, as the
// external-resizer does, and reports the claim Bound with its PV's capacity.
func (p *provisioner) syncBound(ctx context.Context, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) error {
	if name := volumeHandle(pv); name != "" {
		if err := p.expand(ctx, pvc, pv, name); err != nil {
			return err
		}
	}
	capacity := pv.Spec.Capacity[corev1.ResourceStorage]
	have := pvc.Status.Capacity[corev1.ResourceStorage]
	if pvc.Status.Phase == corev1.ClaimBound && have.Cmp(capacity) == 0 {
		return nil
	}
	base := pvc.DeepCopy()
	pvc.Status.Phase = corev1.ClaimBound
	pvc.Status.AccessModes = pv.Spec.AccessModes
	pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: capacity}
	if err := p.sim.client.Status().Patch(ctx, pvc, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("marking claim %s/%s Bound: %w", pvc.Namespace, pvc.Name, err)
	}
	return nil
}

// expand grows the Volume to the claim's request (as Longhorn's API does,
// with an Update of spec.size), and the PersistentVolume once every replica
// has the new size.
func (p *provisioner) expand(ctx context.Context, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume, name string) error {
	want, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	capacity := pv.Spec.Capacity[corev1.ResourceStorage]
	if !ok || want.Cmp(capacity) <= 0 {
		return nil
	}
	size := roundUpSize(want.Value())
	vol := &lhv1.Volume{}
	if err := p.sim.client.Get(ctx, types.NamespacedName{Namespace: p.sim.namespace, Name: name}, vol); err != nil {
		return client.IgnoreNotFound(err)
	}
	if vol.Spec.Size < size {
		vol.Spec.Size = size
		if err := p.sim.client.Update(ctx, vol); err != nil {
			return fmt.Errorf("expanding volume %s to %d bytes: %w", name, size, err)
		}
		ctrl.LoggerFrom(ctx).Info("Expanding the volume", "volume", name, "size", size)
		return nil // the replicas' resizing brings the claim back
	}
	replicas := &lhv1.ReplicaList{}
	if err := p.sim.client.List(ctx, replicas, client.InNamespace(p.sim.namespace), client.MatchingFields{replicaByVolume: name}); err != nil {
		return fmt.Errorf("listing the replicas of volume %s: %w", name, err)
	}
	for _, r := range replicas.Items {
		if r.Spec.VolumeSize < vol.Spec.Size {
			return nil // not expanded yet
		}
	}
	base := pv.DeepCopy()
	pv.Spec.Capacity = corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(vol.Spec.Size, resource.BinarySI)}
	if err := p.sim.client.Patch(ctx, pv, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("expanding PersistentVolume %s to %d bytes: %w", pv.Name, vol.Spec.Size, err)
	}
	return nil
}

// releaseClaim removes the pvc-protection finalizer of a deleted claim
// once no pod that may still run uses it, as the pvc-protection controller does.
func (p *provisioner) releaseClaim(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	if !controllerutil.ContainsFinalizer(pvc, finalizerPVCProtection) {
		return nil
	}
	pods := &corev1.PodList{}
	key := pvc.Namespace + "/" + pvc.Name
	if err := p.sim.client.List(ctx, pods, client.InNamespace(pvc.Namespace), client.MatchingFields{podByClaim: key}); err != nil {
		return fmt.Errorf("listing the pods of claim %s: %w", key, err)
	}
	for _, pod := range pods.Items {
		if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			return nil // the pod's deletion brings the claim back
		}
	}
	controllerutil.RemoveFinalizer(pvc, finalizerPVCProtection)
	if err := p.sim.client.Update(ctx, pvc); err != nil {
		return fmt.Errorf("releasing claim %s: %w", key, err)
	}
	return nil
}

// reconcilePV reclaims the PersistentVolume of a Longhorn claim that is
// gone: with reclaim policy Delete, it deletes the Volume and the
// PersistentVolume; with Retain, it marks the PersistentVolume Released.
func (p *provisioner) reconcilePV(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pv := &corev1.PersistentVolume{}
	if err := p.sim.client.Get(ctx, req.NamespacedName, pv); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	name := volumeHandle(pv)
	if name == "" || pv.Spec.ClaimRef == nil {
		return reconcile.Result{}, nil
	}
	bound, err := p.claimExists(ctx, pv.Spec.ClaimRef)
	if err != nil || bound {
		return reconcile.Result{}, err
	}
	if !pv.DeletionTimestamp.IsZero() {
		if controllerutil.RemoveFinalizer(pv, finalizerPVProtection) {
			if err := p.sim.client.Update(ctx, pv); err != nil {
				return requeueOnConflict(fmt.Errorf("releasing PersistentVolume %s: %w", pv.Name, err))
			}
		}
		return reconcile.Result{}, nil
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		if pv.Status.Phase != corev1.VolumeReleased {
			base := pv.DeepCopy()
			pv.Status.Phase = corev1.VolumeReleased
			if err := p.sim.client.Status().Patch(ctx, pv, client.MergeFrom(base)); err != nil {
				return reconcile.Result{}, fmt.Errorf("releasing PersistentVolume %s: %w", pv.Name, err)
			}
		}
		return reconcile.Result{}, nil
	}
	vol := &lhv1.Volume{ObjectMeta: metav1.ObjectMeta{Namespace: p.sim.namespace, Name: name}}
	if err := p.sim.client.Delete(ctx, vol); client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, fmt.Errorf("deleting volume %s: %w", name, err)
	}
	if err := p.sim.client.Delete(ctx, pv); client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, fmt.Errorf("deleting PersistentVolume %s: %w", pv.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Reclaimed the volume of a deleted claim", "volume", name,
		"claim", pv.Spec.ClaimRef.Namespace+"/"+pv.Spec.ClaimRef.Name)
	return reconcile.Result{}, nil
}

// claimExists reports whether the claim a PersistentVolume is bound to
// still exists (the same claim, by UID).
func (p *provisioner) claimExists(ctx context.Context, ref *corev1.ObjectReference) (bool, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := p.sim.client.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, pvc); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("getting claim %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	return ref.UID == "" || pvc.UID == ref.UID, nil
}

// classClaims maps a StorageClass to its unbound claims.
func (p *provisioner) classClaims(ctx context.Context, o client.Object) []reconcile.Request {
	claims := &corev1.PersistentVolumeClaimList{}
	if err := p.sim.client.List(ctx, claims, client.MatchingFields{claimByClass: o.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the claims of a class", "storageClass", o.GetName())
		return nil
	}
	out := make([]reconcile.Request, 0, len(claims.Items))
	for i := range claims.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&claims.Items[i])})
	}
	return out
}

// VolumeName is the name of the Longhorn Volume provisioned for a claim.
func VolumeName(pvc *corev1.PersistentVolumeClaim) string { return "pvc-" + string(pvc.UID) }

// VolumeFor returns the Longhorn Volume the Longhorn CSI driver creates for
// a claim of class, with the defaults Longhorn v1.12's API and admission
// webhook fill in: the claim's request rounded up to 2 MiB, shaped by the
// class parameters (numberOfReplicas defaults to 3, dataLocality to
// disabled), frontend blockdev, data engine v1, every policy override
// "ignored".
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
	return vol, nil
}

// PersistentVolumeFor returns the PersistentVolume of the Longhorn CSI
// driver for vol, bound to the claim.
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
		ObjectMeta: metav1.ObjectMeta{Name: vol.Name, Annotations: map[string]string{annProvisionedBy: CSIDriver}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(vol.Spec.Size, resource.BinarySI)},
			AccessModes:                   pvc.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: reclaim,
			StorageClassName:              class.Name,
			VolumeMode:                    pvc.Spec.VolumeMode,
			MountOptions:                  class.MountOptions,
			ClaimRef: &corev1.ObjectReference{
				APIVersion: "v1", Kind: "PersistentVolumeClaim", Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID,
			},
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
