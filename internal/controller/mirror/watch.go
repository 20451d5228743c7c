package mirror

import (
	"context"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
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
// spec changes, when a Replica or BackingImage joins, leaves or changes
// size on its disk, and when a Replica it holds an entry for changes while
// on another disk or none (its write may have lost). Longhorn's frequent
// status writes of replicas on their disk enqueue nothing.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&dsv1.DiskSchedule{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&lhv1.Replica{}, index.EnqueueDisks(index.ReplicaDisks)).
		Watches(&lhv1.Replica{}, r.unbackedEntries()).
		Watches(&lhv1.BackingImage{}, index.EnqueueDisks(index.BackingImageDisks)).
		Named("mirror").
		Complete(r)
}

// unbackedEntries enqueues the ledgers that hold an entry for a Replica
// that is created or changes while it is not on their disk: the entry may
// now be lost (persisted elsewhere, or its admitted write lost), which the
// mirror releases at once.
func (r *Reconciler) unbackedEntries() handler.EventHandler {
	add := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], obj client.Object) {
		rep, ok := obj.(*lhv1.Replica)
		if !ok {
			return
		}
		// Only the names are read: no copies of the cache's ledgers.
		list := &dsv1.DiskScheduleList{}
		if err := r.client.List(ctx, list, client.InNamespace(rep.Namespace), client.MatchingFields{index.DiskScheduleByReplica: rep.Name},
			client.UnsafeDisableDeepCopy); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing the ledgers that hold a replica's entry", "replica", rep.Name)
			return
		}
		for i := range list.Items {
			if list.Items[i].Name != rep.Spec.DiskID {
				q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
			}
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q, e.Object)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q, e.ObjectNew)
		},
	}
}
