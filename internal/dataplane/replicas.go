package dataplane

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	longhornv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

// Replicas plays the instance managers: a Replica starts (status.currentState
// running) once its disk's ledger grants it.
type Replicas struct {
	client client.Client
}

// SetupWithManager registers the controller.
func (r *Replicas) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("dataplane-replicas").
		For(&longhornv1.Replica{}).
		Watches(&longhornv1.DiskSchedule{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			ds := o.(*longhornv1.DiskSchedule)
			var out []reconcile.Request
			for name := range ds.Status.Replicas {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: ds.Namespace, Name: name}})
			}
			return out
		})).
		Complete(reconcile.Func(r.reconcile))
}

// reconcile starts a granted replica. It patches with the replica's
// resourceVersion, so a status written meanwhile is read again first.
func (r *Replicas) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	rep := &longhornv1.Replica{}
	if err := r.client.Get(ctx, req.NamespacedName, rep); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !rep.DeletionTimestamp.IsZero() || rep.Spec.DiskID == "" || rep.Status.CurrentState == longhornv1.ReplicaStateRunning {
		return reconcile.Result{}, nil
	}
	ds := &longhornv1.DiskSchedule{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: rep.Namespace, Name: rep.Spec.DiskID}, ds); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !Granted(ds, rep) {
		return reconcile.Result{}, nil
	}
	base := rep.DeepCopy()
	rep.Status.CurrentState = longhornv1.ReplicaStateRunning
	if err := r.client.Status().Patch(ctx, rep, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return requeueOnConflict(fmt.Errorf("starting replica %s: %w", rep.Name, err))
	}
	ctrl.LoggerFrom(ctx).Info("Started the replica", "replica", klog.KObj(rep), "node", rep.Spec.NodeID, "diskSchedule", ds.Name)
	return reconcile.Result{}, nil
}

// Granted reports whether ds grants rep exactly its size: the entry is
// scheduled with scheduledSize equal to spec.volumeSize.
func Granted(ds *longhornv1.DiskSchedule, rep *longhornv1.Replica) bool {
	st, ok := ds.Status.Replicas[rep.Name]
	return ok && st.State == longhornv1.RequestStateScheduled && st.ScheduledSize == rep.Spec.VolumeSize
}
