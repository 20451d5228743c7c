package mirror

import (
	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/index"
)

// SetupWithManager registers the controller. It mirrors a ledger when its
// spec changes, and when a Replica or BackingImage joins, leaves or changes
// size on its disk. Longhorn's frequent status writes enqueue nothing.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&dsv1.DiskSchedule{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&lhv1.Replica{}, index.EnqueueDisks(index.ReplicaDisks)).
		Watches(&lhv1.BackingImage{}, index.EnqueueDisks(index.BackingImageDisks)).
		Named("mirror").
		Complete(r)
}
