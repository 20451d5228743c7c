package dataplane

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	longhornv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

// Attacher plays the CSI attacher: a Volume is attached (spec.nodeID) to
// the node of a live pod using it, and detached when no live pod does.
type Attacher struct {
	client   client.Client
	resolver resolver
}

// SetupWithManager registers the controller.
func (a *Attacher) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("dataplane-attacher").
		For(&longhornv1.Volume{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(a.resolver.podRequests)).
		Watches(&corev1.PersistentVolumeClaim{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			vol, err := a.resolver.claimVolume(ctx, o.GetNamespace(), o.GetName())
			if err != nil || vol == "" {
				return nil
			}
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: a.resolver.namespace, Name: vol}}}
		})).
		Complete(reconcile.Func(a.reconcile))
}

// reconcile sets the volume's spec.nodeID to the node of the pods using it.
// The attacher is the only writer of spec.nodeID, so a merge patch of that
// field alone cannot undo another writer's change.
func (a *Attacher) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	vol := &longhornv1.Volume{}
	if err := a.client.Get(ctx, req.NamespacedName, vol); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	pods, err := a.resolver.volumePods(ctx, vol.Name)
	if err != nil {
		return reconcile.Result{}, err
	}
	node := AttachNode(vol.Spec.NodeID, pods)
	if node == vol.Spec.NodeID || !vol.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	base := vol.DeepCopy()
	vol.Spec.NodeID = node
	if err := a.client.Patch(ctx, vol, client.MergeFrom(base)); err != nil {
		return reconcile.Result{}, fmt.Errorf("attaching volume %s to %q: %w", vol.Name, node, err)
	}
	if node == "" {
		ctrl.LoggerFrom(ctx).Info("Detached the volume", "volume", klog.KObj(vol), "from", base.Spec.NodeID)
	} else {
		ctrl.LoggerFrom(ctx).Info("Attached the volume", "volume", klog.KObj(vol), "node", node)
	}
	return reconcile.Result{}, nil
}

// AttachNode returns the node a volume should be attached to, given the
// node it is attached to now and the pods using it (oldest first): the
// current node while a live pod there uses it, else the node of the oldest
// live pod bound to a node, else none.
func AttachNode(current string, pods []corev1.Pod) string {
	first := ""
	for i := range pods {
		pod := &pods[i]
		if !podIsLive(pod) || pod.Spec.NodeName == "" {
			continue
		}
		if pod.Spec.NodeName == current {
			return current
		}
		if first == "" {
			first = pod.Spec.NodeName
		}
	}
	return first
}
