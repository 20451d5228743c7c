package simcluster

import (
	"context"
	"fmt"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/longhorn/diskschedule/internal/settings"
)

// settingController plays Longhorn's setting controller: a Setting whose
// value Longhorn accepts is marked applied.
type settingController struct {
	sim *sim
}

func (c *settingController) setup(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("simcluster-setting").
		For(&lhv1.Setting{}, builder.WithPredicates(predicate.NewPredicateFuncs(c.sim.inNamespace))).
		Complete(reconcile.Func(c.reconcile))
}

// reconcile sets status.applied: true for a valid value, false for a
// scheduling setting whose value does not parse (Longhorn keeps the old one).
func (c *settingController) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	s := &lhv1.Setting{}
	if err := c.sim.client.Get(ctx, req.NamespacedName, s); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	applied := settings.Validate(s.Name, s.Value) == nil
	if s.Status.Applied == applied {
		return reconcile.Result{}, nil
	}
	s.Status.Applied = applied
	if err := c.sim.client.Status().Update(ctx, s); err != nil {
		return requeueOnConflict(fmt.Errorf("updating the status of setting %s: %w", s.Name, err))
	}
	return reconcile.Result{}, nil
}
