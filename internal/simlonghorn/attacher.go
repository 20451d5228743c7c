package simlonghorn

import (
	"context"
	"fmt"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// attacher plays the CSI attacher with Longhorn's volume-attachment
// controller: a Volume is attached (spec.nodeID) to the node of a live pod
// using it, and detached when no live pod does.
type attacher struct {
	sim *sim
}

func (a *attacher) setup(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("simlonghorn-csi-attacher").
		For(&lhv1.Volume{}, builder.WithPredicates(predicate.NewPredicateFuncs(a.sim.inNamespace))).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(a.sim.podVolumeRequests)).
		Watches(&corev1.PersistentVolumeClaim{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			vol, err := a.sim.claimVolume(ctx, o.GetNamespace(), o.GetName())
			if err != nil || vol == "" {
				return nil
			}
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: a.sim.namespace, Name: vol}}}
		})).
		Complete(reconcile.Func(a.reconcile))
}

// reconcile sets the volume's spec.nodeID to the node of the pods using it,
// with an Update as Longhorn's volume-attachment controller does.
func (a *attacher) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	vol := &lhv1.Volume{}
	if err := a.sim.client.Get(ctx, req.NamespacedName, vol); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	pods, err := a.sim.volumePods(ctx, vol.Name)
	if err != nil {
		return reconcile.Result{}, err
	}
	node := AttachNode(vol.Spec.NodeID, pods)
	if node == vol.Spec.NodeID || !vol.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	from := vol.Spec.NodeID
	vol.Spec.NodeID = node
	if err := a.sim.client.Update(ctx, vol); err != nil {
		return requeueOnConflict(fmt.Errorf("attaching volume %s to %q: %w", vol.Name, node, err))
	}
	if node == "" {
		ctrl.LoggerFrom(ctx).Info("Detached the volume", "volume", klog.KObj(vol), "from", from)
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
