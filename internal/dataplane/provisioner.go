package dataplane

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

	longhornv1 "github.com/longhorn/diskschedule/api/v1beta2"
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

// Provisioner plays the CSI external-provisioner and external-resizer of
// the Longhorn driver, with the parts of the Kubernetes PV and protection
// controllers they rely on: it provisions and binds claims, expands them,
// and reclaims their volumes.
type Provisioner struct {
	client    client.Client
	resolver  resolver
	namespace string
	recorder  events.EventRecorder
}

// SetupWithManager registers the claim and the reclaim controllers.
func (p *Provisioner) SetupWithManager(mgr ctrl.Manager) error {
	p.recorder = mgr.GetEventRecorder("dataplane-provisioner")
	if err := ctrl.NewControllerManagedBy(mgr).Named("dataplane-provisioner").
		For(&corev1.PersistentVolumeClaim{}).
		Watches(&storagev1.StorageClass{}, handler.EnqueueRequestsFromMapFunc(p.classClaims)).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			var out []reconcile.Request
			for _, claim := range claimNames(o.(*corev1.Pod)) {
				out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: claim}})
			}
			return out
		})).
		Watches(&longhornv1.Volume{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			claims, err := p.resolver.volumeClaims(ctx, o.GetName())
			if err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "Finding the claims of a volume", "volume", o.GetName())
			}
			var out []reconcile.Request
			for _, c := range claims {
				out = append(out, reconcile.Request{NamespacedName: c})
			}
			return out
		})).
		Complete(reconcile.Func(p.reconcileClaim)); err != nil {
		return err
	}
	longhornPV := predicate.NewPredicateFuncs(func(o client.Object) bool {
		pv, ok := o.(*corev1.PersistentVolume)
		return ok && volumeHandle(pv) != ""
	})
	return ctrl.NewControllerManagedBy(mgr).Named("dataplane-reclaimer").
		For(&corev1.PersistentVolume{}, builder.WithPredicates(longhornPV)).
		Watches(&corev1.PersistentVolumeClaim{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if name := o.(*corev1.PersistentVolumeClaim).Spec.VolumeName; name != "" {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: name}}}
			}
			return nil
		})).
		Complete(reconcile.Func(p.reconcilePV))
}

// reconcileClaim provisions and binds an unbound claim of a Longhorn
// class, keeps a bound claim's status and size in step with its volume, and
// lets a deleted claim go once no pod uses it.
func (p *Provisioner) reconcileClaim(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := p.client.Get(ctx, req.NamespacedName, pvc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !pvc.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, p.releaseClaim(ctx, pvc)
	}
	if pvc.Spec.VolumeName != "" {
		pv := &corev1.PersistentVolume{}
		if err := p.client.Get(ctx, types.NamespacedName{Name: pvc.Spec.VolumeName}, pv); err != nil {
			if apierrors.IsNotFound(err) && pvc.Annotations[annStorageProvisioner] == CSIDriver {
				// Bound a moment ago: the cache has not seen the new PersistentVolume yet.
				return reconcile.Result{RequeueAfter: time.Second}, nil
			}
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		return reconcile.Result{}, p.syncBound(ctx, pvc, pv)
	}
	if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName == "" {
		return reconcile.Result{}, nil
	}
	class := &storagev1.StorageClass{}
	if err := p.client.Get(ctx, types.NamespacedName{Name: *pvc.Spec.StorageClassName}, class); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err) // the class's creation brings the claim back
	}
	if class.Provisioner != CSIDriver {
		return reconcile.Result{}, nil
	}
	if class.VolumeBindingMode != nil && *class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer &&
		pvc.Annotations[annSelectedNode] == "" {
		return reconcile.Result{}, nil // kube-scheduler selects the node first
	}
	return reconcile.Result{}, p.provision(ctx, pvc, class)
}

// provision creates the claim's Volume and PersistentVolume and binds them.
// Every step is idempotent: a failed step is retried from the start.
func (p *Provisioner) provision(ctx context.Context, pvc *corev1.PersistentVolumeClaim, class *storagev1.StorageClass) error {
	log := ctrl.LoggerFrom(ctx)
	vol, err := VolumeFor(pvc, class, p.namespace)
	if err != nil {
		p.recorder.Eventf(pvc, nil, corev1.EventTypeWarning, "ProvisioningFailed", "Provision", "%v", err)
		log.Error(err, "Cannot provision the claim", "claim", klog.KObj(pvc))
		return nil // a new claim or class brings it back
	}
	if err := p.client.Create(ctx, vol); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating volume %s for claim %s/%s: %w", vol.Name, pvc.Namespace, pvc.Name, err)
	}
	pv := PersistentVolumeFor(pvc, class, vol)
	if err := p.client.Create(ctx, pv); apierrors.IsAlreadyExists(err) {
		if err := p.client.Get(ctx, client.ObjectKeyFromObject(pv), pv); err != nil {
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
		if err := p.client.Status().Patch(ctx, pv, client.MergeFrom(base)); err != nil {
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
	if err := p.client.Update(ctx, pvc); err != nil {
		return fmt.Errorf("binding claim %s/%s to %s: %w", pvc.Namespace, pvc.Name, pv.Name, err)
	}
	log.Info("Provisioned the claim", "claim", klog.KObj(pvc), "volume", vol.Name,
		"size", vol.Spec.Size.String(), "numberOfReplicas", vol.Spec.NumberOfReplicas, "dataLocality", vol.Spec.DataLocality)
	return p.syncBound(ctx, pvc, pv)
}

// syncBound expands the volume of a bound claim that asks for more, as the
// external-resizer does, and reports the claim Bound with its PV's capacity.
func (p *Provisioner) syncBound(ctx context.Context, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) error {
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
	if err := p.client.Status().Patch(ctx, pvc, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("marking claim %s/%s Bound: %w", pvc.Namespace, pvc.Name, err)
	}
	return nil
}

// expand grows the Volume to the claim's request, and the PersistentVolume
// once the Volume's status.currentSize shows the expansion done.
func (p *Provisioner) expand(ctx context.Context, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume, name string) error {
	want, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	capacity := pv.Spec.Capacity[corev1.ResourceStorage]
	if !ok || want.Cmp(capacity) <= 0 {
		return nil
	}
	vol := &longhornv1.Volume{}
	if err := p.client.Get(ctx, types.NamespacedName{Namespace: p.namespace, Name: name}, vol); err != nil {
		return client.IgnoreNotFound(err)
	}
	if vol.Spec.Size.Cmp(want) < 0 {
		base := vol.DeepCopy()
		vol.Spec.Size = want
		if err := p.client.Patch(ctx, vol, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("expanding volume %s to %s: %w", name, want.String(), err)
		}
		ctrl.LoggerFrom(ctx).Info("Expanding the volume", "volume", name, "size", want.String())
		return nil // the volume's status brings the claim back
	}
	if vol.Status.CurrentSize.Cmp(want) < 0 {
		return nil
	}
	base := pv.DeepCopy()
	pv.Spec.Capacity = corev1.ResourceList{corev1.ResourceStorage: want}
	if err := p.client.Patch(ctx, pv, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("expanding PersistentVolume %s to %s: %w", pv.Name, want.String(), err)
	}
	return nil
}

// releaseClaim removes the pvc-protection finalizer of a deleted claim
// once no pod that may still run uses it, as the pvc-protection controller does.
func (p *Provisioner) releaseClaim(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	if !controllerutil.ContainsFinalizer(pvc, finalizerPVCProtection) {
		return nil
	}
	pods := &corev1.PodList{}
	key := pvc.Namespace + "/" + pvc.Name
	if err := p.client.List(ctx, pods, client.InNamespace(pvc.Namespace), client.MatchingFields{podByClaim: key}); err != nil {
		return fmt.Errorf("listing the pods of claim %s: %w", key, err)
	}
	for _, pod := range pods.Items {
		if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			return nil // the pod's deletion brings the claim back
		}
	}
	controllerutil.RemoveFinalizer(pvc, finalizerPVCProtection)
	if err := p.client.Update(ctx, pvc); err != nil {
		return client.IgnoreNotFound(err)
	}
	return nil
}

// reconcilePV reclaims the PersistentVolume of a Longhorn claim that is
// gone: with reclaim policy Delete, it deletes the Volume and the
// PersistentVolume; with Retain, it marks the PersistentVolume Released.
func (p *Provisioner) reconcilePV(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pv := &corev1.PersistentVolume{}
	if err := p.client.Get(ctx, req.NamespacedName, pv); err != nil {
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
			if err := p.client.Update(ctx, pv); err != nil {
				return reconcile.Result{}, client.IgnoreNotFound(err)
			}
		}
		return reconcile.Result{}, nil
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		if pv.Status.Phase != corev1.VolumeReleased {
			base := pv.DeepCopy()
			pv.Status.Phase = corev1.VolumeReleased
			if err := p.client.Status().Patch(ctx, pv, client.MergeFrom(base)); err != nil {
				return reconcile.Result{}, fmt.Errorf("releasing PersistentVolume %s: %w", pv.Name, err)
			}
		}
		return reconcile.Result{}, nil
	}
	vol := &longhornv1.Volume{ObjectMeta: metav1.ObjectMeta{Namespace: p.namespace, Name: name}}
	if err := p.client.Delete(ctx, vol); client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, fmt.Errorf("deleting volume %s: %w", name, err)
	}
	if err := p.client.Delete(ctx, pv); client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, fmt.Errorf("deleting PersistentVolume %s: %w", pv.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Reclaimed the volume of a deleted claim", "volume", name,
		"claim", pv.Spec.ClaimRef.Namespace+"/"+pv.Spec.ClaimRef.Name)
	return reconcile.Result{}, nil
}

// claimExists reports whether the claim a PersistentVolume is bound to
// still exists (the same claim, by UID).
func (p *Provisioner) claimExists(ctx context.Context, ref *corev1.ObjectReference) (bool, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := p.client.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, pvc); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, err
	}
	return ref.UID == "" || pvc.UID == ref.UID, nil
}

// classClaims maps a StorageClass to its unbound claims.
func (p *Provisioner) classClaims(ctx context.Context, o client.Object) []reconcile.Request {
	claims := &corev1.PersistentVolumeClaimList{}
	if err := p.client.List(ctx, claims, client.MatchingFields{claimByClass: o.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the claims of a class", "storageClass", o.GetName())
		return nil
	}
	var out []reconcile.Request
	for i := range claims.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&claims.Items[i])})
	}
	return out
}

// VolumeName is the name of the Longhorn Volume provisioned for a claim.
func VolumeName(pvc *corev1.PersistentVolumeClaim) string { return "pvc-" + string(pvc.UID) }

// VolumeFor returns the Longhorn Volume the Longhorn CSI driver creates for
// a claim of class: the claim's requested size, shaped by the class
// parameters (numberOfReplicas defaults to 3, dataLocality to disabled).
func VolumeFor(pvc *corev1.PersistentVolumeClaim, class *storagev1.StorageClass, namespace string) (*longhornv1.Volume, error) {
	size, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok || size.Sign() <= 0 {
		return nil, fmt.Errorf("claim %s/%s requests no storage", pvc.Namespace, pvc.Name)
	}
	params := class.Parameters
	vol := &longhornv1.Volume{
		ObjectMeta: metav1.ObjectMeta{Name: VolumeName(pvc), Namespace: namespace},
		Spec: longhornv1.VolumeSpec{
			Size: size, NumberOfReplicas: 3, DataLocality: longhornv1.DataLocalityDisabled,
			NodeSelector: splitTags(params[ParamNodeSelector]), DiskSelector: splitTags(params[ParamDiskSelector]),
			BackingImage: params[ParamBackingImage],
		},
	}
	if v := params[ParamNumberOfReplicas]; v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, fmt.Errorf("storage class %s: parameter %s %q is not a number", class.Name, ParamNumberOfReplicas, v)
		}
		vol.Spec.NumberOfReplicas = n
	}
	if v := params[ParamDataLocality]; v != "" {
		vol.Spec.DataLocality = longhornv1.DataLocality(v)
	}
	return vol, nil
}

// PersistentVolumeFor returns the PersistentVolume of the Longhorn CSI
// driver for vol, bound to the claim.
func PersistentVolumeFor(pvc *corev1.PersistentVolumeClaim, class *storagev1.StorageClass, vol *longhornv1.Volume) *corev1.PersistentVolume {
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
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: vol.Spec.Size},
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

// splitTags splits a comma-separated tag list, as Longhorn's class
// parameters write selectors.
func splitTags(s string) []string {
	var out []string
	for _, t := range strings.Split(s, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}
