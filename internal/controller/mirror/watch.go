package mirror

import (
	"context"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/index"
)

// SetupWithManager registers the controller. It mirrors a ledger when its
// spec changes, when a Replica or BackingImage joins, leaves or changes size
// on its disk, and when a Volume with a replica on it changes size.
// Longhorn's frequent status writes enqueue nothing.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&dsv1.DiskSchedule{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&lhv1.Replica{}, index.EnqueueDisks(index.ReplicaDisks)).
		Watches(&lhv1.BackingImage{}, index.EnqueueDisks(index.BackingImageDisks)).
		Watches(&lhv1.Volume{}, r.volumeHandler()).
		Named("mirror").
		Complete(r)
}

// volumeHandler enqueues the ledgers of a Volume's replicas when its
// spec.size changes (or it comes or goes).
func (r *Reconciler) volumeHandler() handler.EventHandler {
	add := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], obj client.Object) {
		list := &lhv1.ReplicaList{}
		if err := r.client.List(ctx, list, client.InNamespace(obj.GetNamespace()), client.MatchingFields{index.ReplicaByVolume: obj.GetName()}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing a volume's replicas to mirror their ledgers", "volume", obj.GetName())
			return
		}
		for i := range list.Items {
			if disk := list.Items[i].Spec.DiskID; disk != "" {
				q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: disk}})
			}
		}
	}
	size := func(obj client.Object) int64 {
		if v, ok := obj.(*lhv1.Volume); ok {
			return v.Spec.Size
		}
		return 0
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q, e.Object)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if size(e.ObjectOld) != size(e.ObjectNew) {
				add(ctx, q, e.ObjectNew)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q, e.Object)
		},
	}
}
