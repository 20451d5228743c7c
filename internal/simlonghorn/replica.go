package simlonghorn

import (
	"context"
	"fmt"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// replicaPort is the port every simulated replica listens on.
const replicaPort = 10000

// replicaController plays the instance managers that run replicas, with
// the parts of Longhorn's replica controller that start them (a replica
// with a backing image first asks for the image's copy on its disk and
// waits for it) and the garbage collector that removes the replicas of a
// deleted volume.
type replicaController struct {
	sim *sim
}

func (c *replicaController) setup(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("simlonghorn-replica").
		For(&lhv1.Replica{}, builder.WithPredicates(predicate.NewPredicateFuncs(c.sim.inNamespace))).
		Watches(&lhv1.BackingImage{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return c.replicaRequests(ctx, replicaByBackingImage, o)
		})).
		Watches(&lhv1.Volume{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return c.replicaRequests(ctx, replicaByVolume, o)
		})).
		Complete(reconcile.Func(c.reconcile))
}

// replicaRequests maps a backing image or volume to the replicas indexed
// under its name by field.
func (c *replicaController) replicaRequests(ctx context.Context, field string, o client.Object) []reconcile.Request {
	if !c.sim.inNamespace(o) {
		return nil
	}
	list := &lhv1.ReplicaList{}
	if err := c.sim.client.List(ctx, list, client.InNamespace(c.sim.namespace), client.MatchingFields{field: o.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing replicas", "by", field, "name", o.GetName())
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return out
}

// reconcile removes a replica whose owning volume is gone, and otherwise
// brings its instance to its desired state: running once scheduled, asked
// to run and its backing image (if any) is ready on its disk; stopped
// otherwise. The status is written with one Update when it changed.
func (c *replicaController) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	r := &lhv1.Replica{}
	if err := c.sim.client.Get(ctx, req.NamespacedName, r); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !r.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	vol := &lhv1.Volume{}
	if err := c.sim.client.Get(ctx, types.NamespacedName{Namespace: r.Namespace, Name: r.Spec.VolumeName}, vol); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, fmt.Errorf("getting volume %s: %w", r.Spec.VolumeName, err)
		}
		vol = nil
	}
	if orphaned(r, vol) {
		if err := c.sim.client.Delete(ctx, r, client.Preconditions{UID: &r.UID}); client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, fmt.Errorf("deleting replica %s of a deleted volume: %w", r.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("Deleted a replica of a deleted volume", "replica", klog.KObj(r), "volume", r.Spec.VolumeName)
		return reconcile.Result{}, nil
	}

	run := r.Spec.DesireState == lhv1.InstanceStateRunning && r.Spec.NodeID != "" && r.Spec.DiskID != ""
	var result reconcile.Result
	if run && r.Spec.BackingImage != "" {
		ready, refused, err := c.backingImageReady(ctx, r)
		if err != nil {
			return requeueOnConflict(err)
		}
		if refused {
			result.RequeueAfter = refusedRetryMax
		}
		run = ready
	}
	status := instanceStatus(r, run, c.nodeIP(r.Spec.NodeID))
	if apiequality.Semantic.DeepEqual(r.Status, status) {
		return result, nil
	}
	r.Status = status
	if err := c.sim.client.Status().Update(ctx, r); err != nil {
		return requeueOnConflict(fmt.Errorf("updating the status of replica %s: %w", r.Name, err))
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Replica instance", "replica", klog.KObj(r), "state", status.CurrentState, "node", r.Spec.NodeID)
	return result, nil
}

// backingImageReady reports whether r's backing image has a ready copy on
// r's disk. When the image has no copy there yet, it asks for one by adding
// the disk to the image's diskFileSpecMap, as Longhorn's replica controller
// does before it starts a replica; the image's change brings r back, and
// refused tells that the API server refused the request (to be retried).
func (c *replicaController) backingImageReady(ctx context.Context, r *lhv1.Replica) (ready, refused bool, err error) {
	bi := &lhv1.BackingImage{}
	if err := c.sim.client.Get(ctx, types.NamespacedName{Namespace: r.Namespace, Name: r.Spec.BackingImage}, bi); err != nil {
		if apierrors.IsNotFound(err) {
			ctrl.LoggerFrom(ctx).Info("Replica waits for its backing image", "replica", klog.KObj(r), "backingImage", r.Spec.BackingImage)
			return false, false, nil
		}
		return false, false, fmt.Errorf("getting backing image %s: %w", r.Spec.BackingImage, err)
	}
	if bi.Status.UUID == "" {
		return false, false, nil // not initialised yet
	}
	if _, ok := bi.Spec.DiskFileSpecMap[r.Spec.DiskID]; !ok {
		if bi.Spec.DiskFileSpecMap == nil {
			bi.Spec.DiskFileSpecMap = map[string]*lhv1.BackingImageDiskFileSpec{}
		}
		bi.Spec.DiskFileSpecMap[r.Spec.DiskID] = &lhv1.BackingImageDiskFileSpec{DataEngine: r.Spec.DataEngine}
		if err := c.sim.client.Update(ctx, bi); err != nil {
			if apierrors.IsConflict(err) {
				return false, false, err
			}
			ctrl.LoggerFrom(ctx).Info("The API server refused a backing-image copy for a replica; the replica waits",
				"replica", klog.KObj(r), "backingImage", bi.Name, "disk", r.Spec.DiskID, "error", err.Error())
			return false, true, nil
		}
		ctrl.LoggerFrom(ctx).Info("Asked for a backing-image copy on the replica's disk",
			"replica", klog.KObj(r), "backingImage", bi.Name, "node", r.Spec.NodeID, "disk", r.Spec.DiskID)
		return false, false, nil
	}
	st := bi.Status.DiskFileStatusMap[r.Spec.DiskID]
	return st != nil && st.State == lhv1.BackingImageStateReady, false, nil
}

// instanceStatus returns a replica's status with its instance running on
// its node (run) or stopped, as the instance manager reports it.
func instanceStatus(r *lhv1.Replica, run bool, ip string) lhv1.ReplicaStatus {
	st := *r.Status.DeepCopy()
	st.Starting = false
	if run {
		st.OwnerID = r.Spec.NodeID
		st.InstanceManagerName = instanceManagerName(r.Spec.NodeID, InstanceManagerImage)
		st.CurrentState = lhv1.InstanceStateRunning
		st.CurrentImage = r.Spec.Image
		st.IP, st.StorageIP, st.Port = ip, ip, replicaPort
		st.Started = true
		return st
	}
	st.CurrentState = lhv1.InstanceStateStopped
	st.IP, st.StorageIP, st.Port = "", "", 0
	st.Started = false
	if r.Spec.NodeID != "" {
		st.OwnerID = r.Spec.NodeID
	}
	return st
}

// nodeIP returns the simulated address of the named node.
func (c *replicaController) nodeIP(node string) string {
	for i, n := range c.sim.nodes {
		if n.Name == node {
			return fmt.Sprintf("10.42.%d.%d", i/250, i%250+1)
		}
	}
	return "10.42.255.254"
}
