package simlonghorn

import (
	"context"
	"fmt"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// resizer plays the CSI external-resizer with the Longhorn CSI driver's
// ControllerExpandVolume and the kubelet's node expansion: once
// kube-controller-manager's expander leaves a bound claim that asks for more
// than its capacity to an external controller (driver.longhorn.io is no
// in-tree plugin), it grows the Longhorn Volume's spec.size (as Longhorn's
// API does, where the admission gate decides), then, once every replica has
// the new size, the PersistentVolume's capacity and the claim's.
type resizer struct {
	sim *sim
}

func (r *resizer) setup(mgr ctrl.Manager) error {
	volumeClaims := func(ctx context.Context, volume string) []reconcile.Request {
		claims, err := r.sim.volumeClaims(ctx, volume)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Finding the claims of a volume", "volume", volume)
		}
		out := make([]reconcile.Request, 0, len(claims))
		for _, c := range claims {
			out = append(out, reconcile.Request{NamespacedName: c})
		}
		return out
	}
	return ctrl.NewControllerManagedBy(mgr).Named("simlonghorn-csi-resizer").
		For(&corev1.PersistentVolumeClaim{}).
		Watches(&lhv1.Volume{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return volumeClaims(ctx, o.GetName())
		})).
		Watches(&lhv1.Replica{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return volumeClaims(ctx, o.(*lhv1.Replica).Spec.VolumeName)
		})).
		Complete(reconcile.Func(r.reconcile))
}

// reconcile expands the Longhorn volume of a bound claim whose request
// exceeds its capacity, one step per call.
func (r *resizer) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.sim.client.Get(ctx, req.NamespacedName, pvc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !pvc.DeletionTimestamp.IsZero() || pvc.Spec.VolumeName == "" || pvc.Status.Phase != corev1.ClaimBound {
		return reconcile.Result{}, nil
	}
	want, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	have := pvc.Status.Capacity[corev1.ResourceStorage]
	if !ok || want.Cmp(have) <= 0 {
		return reconcile.Result{}, nil
	}
	pv := &corev1.PersistentVolume{}
	if err := r.sim.client.Get(ctx, types.NamespacedName{Name: pvc.Spec.VolumeName}, pv); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	name := volumeHandle(pv)
	if name == "" || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != pvc.UID {
		return reconcile.Result{}, nil
	}
	return requeueOnConflict(r.expand(ctx, pvc, pv, name, roundUpSize(want.Value())))
}

// expand takes the next step of growing volume name to size: the Volume's
// spec.size, then, once its replicas have the size, the PersistentVolume's
// capacity, then the claim's.
func (r *resizer) expand(ctx context.Context, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume, name string, size int64) error {
	vol := &lhv1.Volume{}
	if err := r.sim.client.Get(ctx, types.NamespacedName{Namespace: r.sim.namespace, Name: name}, vol); err != nil {
		return client.IgnoreNotFound(err)
	}
	if vol.Spec.Size < size {
		vol.Spec.Size = size
		if err := r.sim.client.Update(ctx, vol); err != nil {
			return fmt.Errorf("expanding volume %s to %d bytes: %w", name, size, err)
		}
		ctrl.LoggerFrom(ctx).Info("Expanding the volume", "volume", name, "size", size, "claim", klog.KObj(pvc))
		return nil // the replicas' resizing brings the claim back
	}
	expanded, err := r.replicasExpanded(ctx, vol)
	if err != nil || !expanded {
		return err
	}
	capacity := *resource.NewQuantity(vol.Spec.Size, resource.BinarySI)
	if pvCapacity := pv.Spec.Capacity[corev1.ResourceStorage]; pvCapacity.Cmp(capacity) < 0 {
		base := pv.DeepCopy()
		pv.Spec.Capacity = corev1.ResourceList{corev1.ResourceStorage: capacity}
		if err := r.sim.client.Patch(ctx, pv, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("expanding PersistentVolume %s to %d bytes: %w", pv.Name, vol.Spec.Size, err)
		}
	}
	base := pvc.DeepCopy()
	pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: capacity}
	if err := r.sim.client.Status().Patch(ctx, pvc, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("expanding claim %s to %d bytes: %w", klog.KObj(pvc), vol.Spec.Size, err)
	}
	ctrl.LoggerFrom(ctx).Info("Expanded the claim", "claim", klog.KObj(pvc), "volume", name, "size", vol.Spec.Size)
	return nil
}

// replicasExpanded reports whether every replica of vol has its size.
func (r *resizer) replicasExpanded(ctx context.Context, vol *lhv1.Volume) (bool, error) {
	replicas := &lhv1.ReplicaList{}
	if err := r.sim.client.List(ctx, replicas, client.InNamespace(r.sim.namespace), client.MatchingFields{replicaByVolume: vol.Name}); err != nil {
		return false, fmt.Errorf("listing the replicas of volume %s: %w", vol.Name, err)
	}
	for _, rep := range replicas.Items {
		if rep.Spec.VolumeSize < vol.Spec.Size {
			return false, nil
		}
	}
	return true, nil
}
