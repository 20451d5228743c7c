package diskschedule

import (
	"context"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/index"
	"github.com/longhorn/diskschedule/internal/settings"
)

// maxRetryDelay bounds how long a ledger whose decision failed (a read or a
// status write that failed) waits before it is decided again.
const maxRetryDelay = 2 * time.Second

// conflictRetry is how soon a ledger whose status write lost a conflict is
// decided again, should the watch not have brought the version that won
// by then.
const conflictRetry = 50 * time.Millisecond

// SetupWithManager registers the controller: it decides a ledger when it
// changes, when its disk's Longhorn Node changes (limit, schedulability),
// when a Replica or BackingImage joins or leaves its disk (adoption), when
// the pod of one of its reservations is bound, deleted or created, or a
// replica of a reserved volume is placed on its node (rule 6), and every
// ledger when the over-provisioning or minimal-available Setting or the
// reservation timeout changes.
//
// Its sources start on every replica, leader or not (EnableWarmup), so a
// replica that takes over decides at once, with its caches synced, rather
// than first listing what it watches while the gate's requests wait.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.apiReader == nil {
		r.apiReader = mgr.GetAPIReader()
	}
	spaceSettings := predicate.NewPredicateFuncs(func(obj client.Object) bool {
		return obj.GetName() == settings.StorageOverProvisioningPercentage || obj.GetName() == settings.StorageMinimalAvailablePercentage
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(&dsv1.DiskSchedule{}).
		Watches(&lhv1.Node{}, handler.EnqueueRequestsFromMapFunc(r.forNode)).
		Watches(&lhv1.Setting{}, handler.EnqueueRequestsFromMapFunc(r.all), builder.WithPredicates(spaceSettings)).
		Watches(&lhv1.Replica{}, index.EnqueueDisks(index.ReplicaDisks)).
		Watches(&lhv1.BackingImage{}, index.EnqueueDisks(index.BackingImageDisks)).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.forPod), builder.WithPredicates(podPlacementChanged)).
		Watches(&lhv1.Replica{}, handler.EnqueueRequestsFromMapFunc(r.forReservedVolume), builder.WithPredicates(replicaPlacementChanged)).
		WatchesRawSource(source.Channel(r.timeouts.ReservationTimeoutChanges(), handler.EnqueueRequestsFromMapFunc(r.all))).
		// Requesters wait for the ledger's decision: a ledger that failed to
		// decide retries within seconds, not after controller-runtime's
		// default backoff, which grows to minutes.
		WithOptions(controller.Options{MaxConcurrentReconciles: r.workers, EnableWarmup: ptr.To(true),
			RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, maxRetryDelay)}).
		Named("diskschedule").
		Complete(r)
}

// forNode returns the ledgers of a Longhorn Node's disks.
func (r *Reconciler) forNode(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.list(ctx, client.InNamespace(obj.GetNamespace()), client.MatchingFields{index.DiskScheduleByNode: obj.GetName()})
}

// forPod returns the ledgers holding a reservation made for pod.
func (r *Reconciler) forPod(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.list(ctx, client.MatchingFields{index.DiskScheduleByReservationPod: obj.GetNamespace() + "/" + obj.GetName()})
}

// forReservedVolume returns the ledgers of the replica's node holding a
// reservation of its volume.
func (r *Reconciler) forReservedVolume(ctx context.Context, obj client.Object) []reconcile.Request {
	rep, ok := obj.(*lhv1.Replica)
	if !ok || rep.Spec.VolumeName == "" || rep.Spec.NodeID == "" {
		return nil
	}
	list := &dsv1.DiskScheduleList{}
	if err := r.client.List(ctx, list, client.InNamespace(obj.GetNamespace()),
		client.MatchingFields{index.DiskScheduleByReservation: rep.Spec.VolumeName}, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing DiskSchedules to reconcile", "volume", rep.Spec.VolumeName)
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if list.Items[i].Spec.NodeID == rep.Spec.NodeID {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}

// podPlacementChanged passes the pod events rule 6 depends on: a pod
// created or deleted, bound, or marked for deletion; not its frequent
// status updates.
var podPlacementChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		oldPod, okOld := e.ObjectOld.(*corev1.Pod)
		newPod, okNew := e.ObjectNew.(*corev1.Pod)
		return !okOld || !okNew || oldPod.Spec.NodeName != newPod.Spec.NodeName ||
			oldPod.DeletionTimestamp.IsZero() != newPod.DeletionTimestamp.IsZero()
	},
}

// replicaPlacementChanged passes the replica events that may place a
// replica of a reserved volume on a node, or take it away.
var replicaPlacementChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		oldRep, okOld := e.ObjectOld.(*lhv1.Replica)
		newRep, okNew := e.ObjectNew.(*lhv1.Replica)
		return !okOld || !okNew || oldRep.Spec.NodeID != newRep.Spec.NodeID || oldRep.Spec.DiskID != newRep.Spec.DiskID ||
			oldRep.DeletionTimestamp.IsZero() != newRep.DeletionTimestamp.IsZero()
	},
}

// all returns every ledger of the object's namespace.
func (r *Reconciler) all(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.list(ctx, client.InNamespace(obj.GetNamespace()))
}

// list returns the ledgers opts select. Only their names are read, so the
// cache's objects are not copied.
func (r *Reconciler) list(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
	list := &dsv1.DiskScheduleList{}
	if err := r.client.List(ctx, list, append(opts, client.UnsafeDisableDeepCopy)...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing DiskSchedules to reconcile")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}
