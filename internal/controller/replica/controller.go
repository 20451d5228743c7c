// Package replica is the Replica controller. Its one job is the end of a
// replica's life: it keeps the longhorn.io finalizer on every Replica and,
// on deletion, releases the replica's request from its disk's ledger before
// letting the Replica go, so no allocation outlives its replica.
package replica

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	longhornv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledgerclient"
)

// Reconciler releases the ledger requests of deleted replicas.
type Reconciler struct {
	client    client.Client
	apiReader client.Reader
}

// NewReconciler returns a replica Reconciler.
func NewReconciler(c client.Client, apiReader client.Reader) *Reconciler {
	return &Reconciler{client: c, apiReader: apiReader}
}

// +kubebuilder:rbac:groups=longhorn.io,resources=replicas,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=longhorn.io,resources=replicas/finalizers,verbs=update
// +kubebuilder:rbac:groups=longhorn.io,resources=diskschedules,verbs=get;list;watch;update;patch

// Reconcile adds the finalizer, or releases the ledger request and removes it.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	rep := &longhornv1.Replica{}
	if err := r.client.Get(ctx, req.NamespacedName, rep); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if rep.DeletionTimestamp.IsZero() {
		if controllerutil.AddFinalizer(rep, longhornv1.ReplicaFinalizer) {
			if err := r.client.Update(ctx, rep); err != nil {
				return ctrl.Result{}, client.IgnoreNotFound(err)
			}
		}
		return ctrl.Result{}, nil
	}
	if !controllerutil.ContainsFinalizer(rep, longhornv1.ReplicaFinalizer) {
		return ctrl.Result{}, nil
	}
	if rep.Spec.DiskID != "" {
		key := types.NamespacedName{Namespace: rep.Namespace, Name: rep.Spec.DiskID}
		if _, err := ledgerclient.Mutate(ctx, r.apiReader, r.client, key, ledgerclient.RemoveReplica(rep.Name)); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("releasing replica %s from its ledger: %w", rep.Name, err)
		}
		ctrl.LoggerFrom(ctx).V(1).Info("Released the replica's ledger request", "replica", klog.KObj(rep), "diskSchedule", rep.Spec.DiskID)
	}
	controllerutil.RemoveFinalizer(rep, longhornv1.ReplicaFinalizer)
	if err := r.client.Update(ctx, rep); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return ctrl.Result{}, nil
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).For(&longhornv1.Replica{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).Named("replica").Complete(r)
}
