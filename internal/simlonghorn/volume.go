package simlonghorn

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/longhorn/diskschedule/internal/conditions"
	"github.com/longhorn/diskschedule/internal/longhornpod"
)

const (
	// volumeWorkers is how many volumes are reconciled in parallel, each
	// from the same cache, as Longhorn's volume controller workers do.
	volumeWorkers = 4
	// retryUnschedulable is how soon a volume with a replica that found no
	// disk is tried again (Longhorn's 30 s), unless a node or setting
	// change brings it back sooner.
	retryUnschedulable = 30 * time.Second
	// refusedRetryFirst and refusedRetryMax are the per-item backoff of
	// longhorn-manager's work queues (EnhancedDefaultControllerRateLimiter:
	// 5 ms doubling up to 1000 s). Longhorn's controller package does not
	// build outside longhorn-manager (its engine and instance-manager client
	// modules are not published), so its parameters are used with client-go's
	// rate limiter here.
	refusedRetryFirst, refusedRetryMax = 5 * time.Millisecond, 1000 * time.Second
	// refusedRetries is longhorn-manager's maxRetries: after this many quick
	// retries a failing volume is dropped from the queue until the informer
	// resync (longhornpod.Resync) or a node change brings it back.
	refusedRetries = 3
	// cacheWait bounds how long a created replica is waited for in the
	// cache, as Longhorn's datastore verifies a creation.
	cacheWait = 10 * time.Second
)

// EventReasonLocalReplicaSkipped is the reason of the Warning Event a
// best-effort volume gets when no disk of its attached node can take a local
// replica (Longhorn's precheck fails; Longhorn itself only logs it).
const EventReasonLocalReplicaSkipped = "LocalReplicaSkipped"

// volumeController plays Longhorn v1.12's volume controller: it creates
// each volume's replicas, places them, makes them follow the volume and
// reports the volume's state.
type volumeController struct {
	sim      *sim
	recorder events.EventRecorder
	// backoff spaces the retries of a volume whose replica writes are refused.
	backoff workqueue.TypedRateLimiter[types.NamespacedName]
	now     func() time.Time
	newID   func() string
}

func newVolumeController(s *sim) *volumeController {
	return &volumeController{
		sim:     s,
		backoff: workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](refusedRetryFirst, refusedRetryMax),
		now:     time.Now,
		newID:   randomID,
	}
}

// randomID returns 8 random hex digits, as Longhorn names replicas and
// their data directories.
func randomID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (c *volumeController) setup(mgr ctrl.Manager) error {
	c.recorder = mgr.GetEventRecorder("simlonghorn-volume-controller")
	return ctrl.NewControllerManagedBy(mgr).Named("simlonghorn-volume").
		For(&lhv1.Volume{}, builder.WithPredicates(predicate.NewPredicateFuncs(c.sim.inNamespace))).
		Watches(&lhv1.Replica{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			r := o.(*lhv1.Replica)
			if !c.sim.inNamespace(r) || r.Spec.VolumeName == "" {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: r.Namespace, Name: r.Spec.VolumeName}}}
		})).
		Watches(&lhv1.Node{}, handler.EnqueueRequestsFromMapFunc(c.unsettledVolumes)).
		Watches(&lhv1.Setting{}, handler.EnqueueRequestsFromMapFunc(c.unsettledVolumes)).
		WithOptions(controller.Options{MaxConcurrentReconciles: volumeWorkers}).
		Complete(reconcile.Func(c.reconcile))
}

// unsettledVolumes maps a node or setting change to the volumes it may let
// progress: those not Scheduled, and attached best-effort volumes (which
// may now get their local replica).
func (c *volumeController) unsettledVolumes(ctx context.Context, o client.Object) []reconcile.Request {
	if !c.sim.inNamespace(o) {
		return nil
	}
	list := &lhv1.VolumeList{}
	// Read only: the cache's own objects, not copies (every node status
	// change runs this over every volume).
	if err := c.sim.client.List(ctx, list, client.InNamespace(c.sim.namespace), client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing volumes to reconcile")
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		v := &list.Items[i]
		if conditions.LonghornTrue(v.Status.Conditions, lhv1.VolumeConditionTypeScheduled) &&
			!(v.Spec.DataLocality == lhv1.DataLocalityBestEffort && v.Status.CurrentNodeID != "") {
			continue
		}
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(v)})
	}
	return out
}

// reconcile reads a volume with its replicas, the nodes and the settings
// from the cache, plans its replicas (planReplicas), writes each replica
// change (a Create, then an Update for its placement; an Update per changed
// replica; a Delete per surplus one), and writes the volume's status once.
func (c *volumeController) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if req.Namespace != c.sim.namespace {
		return reconcile.Result{}, nil
	}
	log := ctrl.LoggerFrom(ctx)
	vol := &lhv1.Volume{}
	if err := c.sim.client.Get(ctx, req.NamespacedName, vol); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, fmt.Errorf("getting volume %s: %w", req.Name, err)
		}
		c.backoff.Forget(req.NamespacedName)
		return reconcile.Result{}, c.removeOrphans(ctx, req.Name, nil)
	}
	if !vol.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, c.removeOrphans(ctx, vol.Name, nil)
	}
	replicas := &lhv1.ReplicaList{}
	if err := c.sim.client.List(ctx, replicas, client.InNamespace(vol.Namespace), client.MatchingFields{replicaByVolume: vol.Name}); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing the replicas of volume %s: %w", vol.Name, err)
	}
	pod, ownerID, err := c.sim.pods.owner(ctx, vol)
	if err != nil {
		return reconcile.Result{}, err
	}
	now := c.now()
	plan := planReplicas(volumeInput{volume: vol, replicas: replicas.Items, scheduler: pod.Scheduler, now: now, newID: c.newID})
	if plan.localSkipped != "" {
		log.V(1).Info("No disk on the attached node can take a local replica", "volume", vol.Name, "node", vol.Spec.NodeID,
			"reason", plan.localSkipped)
		c.recorder.Eventf(vol, nil, corev1.EventTypeWarning, EventReasonLocalReplicaSkipped, "Schedule",
			"%s", truncate(fmt.Sprintf("no local replica on node %s: %s", vol.Spec.NodeID, plan.localSkipped), maxEventNote))
	}

	if plan.failure != nil {
		log.V(1).Info("Longhorn's scheduler found no disk for a replica", "volume", vol.Name,
			"longhornManager", pod.Node, "errors", plan.failure.detail)
	}
	out, err := c.writeReplicas(ctx, pod, vol, plan)
	if err != nil {
		return reconcile.Result{}, err
	}
	for _, r := range out.refused {
		if c.sim.onRefused != nil {
			c.sim.onRefused(r)
		}
	}
	// As longhorn-manager's syncVolume does: when a replica's Update
	// failed, nothing else of the volume is written in this sync (no engine,
	// no status); the volume waits for the next sync.
	if len(out.refused) == 0 && !out.conflict {
		if err := c.writeStatus(ctx, vol, volumeStatus(vol, out.replicas, plan, now), ownerID); err != nil {
			return requeueOnConflict(err)
		}
	} else {
		log.V(1).Info("A replica write failed: nothing else of the volume is written in this sync", "volume", vol.Name,
			"refused", len(out.refused), "conflict", out.conflict)
	}
	switch {
	case len(out.refused) > 0:
		if c.backoff.NumRequeues(req.NamespacedName) < refusedRetries {
			return reconcile.Result{RequeueAfter: c.backoff.When(req.NamespacedName)}, nil
		}
		c.backoff.Forget(req.NamespacedName)
		return reconcile.Result{RequeueAfter: longhornpod.Resync}, nil
	case out.conflict:
		return reconcile.Result{RequeueAfter: conflictRetry}, nil
	case plan.failure != nil:
		c.backoff.Forget(req.NamespacedName)
		return reconcile.Result{RequeueAfter: retryUnschedulable}, nil
	}
	c.backoff.Forget(req.NamespacedName)
	return reconcile.Result{}, nil
}

// writeStatus writes the volume's status when it changed, with its owner,
// and records the Event of a volume that became unschedulable.
func (c *volumeController) writeStatus(ctx context.Context, vol *lhv1.Volume, status lhv1.VolumeStatus, ownerID string) error {
	status.OwnerID = ownerID
	if apiequality.Semantic.DeepEqual(vol.Status, status) {
		return nil
	}
	was, _ := conditions.Longhorn(vol.Status.Conditions, lhv1.VolumeConditionTypeScheduled)
	now, _ := conditions.Longhorn(status.Conditions, lhv1.VolumeConditionTypeScheduled)
	becameUnschedulable := was.Status != lhv1.ConditionStatusFalse && now.Status == lhv1.ConditionStatusFalse
	vol.Status = status
	if err := c.sim.client.Status().Update(ctx, vol); err != nil {
		return fmt.Errorf("updating the status of volume %s: %w", vol.Name, err)
	}
	if becameUnschedulable {
		cond := now
		c.recorder.Eventf(vol, nil, corev1.EventTypeWarning, cond.Reason, "Schedule", "%s", truncate(cond.Message, maxEventNote))
	}
	return nil
}

// writeOutcome is what writing a plan's replica changes left.
type writeOutcome struct {
	// replicas are the volume's live replicas as persisted now.
	replicas []lhv1.Replica
	// refused are the API server's refusals of replica writes.
	refused []RefusedWrite
	// conflict tells that some write lost a race and must be tried again.
	conflict bool
}

// writeReplicas creates, updates and deletes the plan's replicas; updates
// go through the owning longhorn-manager pod's datastore (UpdateReplica), as
// Longhorn writes them. A refused write is logged and reported, and the
// replica stays as it was: a refused placement leaves it unscheduled, to be
// placed again later.
func (c *volumeController) writeReplicas(ctx context.Context, pod *LonghornManager, vol *lhv1.Volume, plan volumePlan) (writeOutcome, error) {
	log := ctrl.LoggerFrom(ctx)
	var out writeOutcome
	for _, p := range plan.replicas {
		// Stopping: each of the datastore's writes waits for its cache,
		// whose informers stop too, so a write begun now would wait in vain.
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("writing the replicas of volume %s: %w", vol.Name, err)
		}
		cur := p.cur
		if cur == nil {
			created, err := c.create(ctx, vol, p.want)
			if err != nil {
				return out, err
			}
			cur = created
			p.want.ObjectMeta = *created.ObjectMeta.DeepCopy()
			setReplicaLabels(p.want)
		}
		if equalSpec(cur, p.want) {
			out.replicas = append(out.replicas, *cur)
			continue
		}
		next := p.want.DeepCopy()
		written, err := pod.DataStore.UpdateReplica(next)
		switch {
		case err == nil:
			if p.placed {
				log.Info("Scheduled replica", "replica", klog.KObj(written), "node", written.Spec.NodeID,
					"diskUUID", written.Spec.DiskID, "size", written.Spec.VolumeSize, "longhornManager", pod.Node)
			}
			out.replicas = append(out.replicas, *written)
		case apierrors.IsNotFound(err):
			// Deleted meanwhile: nothing to write.
		case apierrors.IsConflict(err):
			out.conflict = true
			out.replicas = append(out.replicas, *cur)
		default:
			what := "updating"
			if p.placed {
				what = fmt.Sprintf("scheduling it to node %s disk %s", next.Spec.NodeID, next.Spec.DiskID)
			} else if next.Spec.VolumeSize > cur.Spec.VolumeSize {
				what = fmt.Sprintf("expanding it to %d bytes", next.Spec.VolumeSize)
			}
			log.Info("The API server refused a replica write; the replica stays as it was and is tried again",
				"replica", klog.KObj(cur), "write", what, "error", err.Error())
			out.refused = append(out.refused, RefusedWrite{Volume: vol.Name, Replica: cur.Name, Write: what, Err: err, At: c.now()})
			out.replicas = append(out.replicas, *cur)
		}
	}
	for _, r := range plan.remove {
		if err := c.sim.client.Delete(ctx, r, client.Preconditions{UID: &r.UID}); client.IgnoreNotFound(err) != nil {
			return out, fmt.Errorf("deleting surplus replica %s: %w", r.Name, err)
		}
		log.Info("Removed a surplus replica", "replica", klog.KObj(r), "node", r.Spec.NodeID, "volume", vol.Name)
	}
	return out, nil
}

// create creates an unscheduled replica and waits until the cache has it,
// so the next reconcile does not create it again.
func (c *volumeController) create(ctx context.Context, vol *lhv1.Volume, want *lhv1.Replica) (*lhv1.Replica, error) {
	r := want.DeepCopy()
	r.Spec.NodeID, r.Spec.DiskID, r.Spec.DiskPath, r.Spec.DataDirectoryName = "", "", "", ""
	r.Spec.DesireState = lhv1.InstanceStateStopped
	setReplicaLabels(r)
	if err := c.sim.client.Create(ctx, r); err != nil {
		return nil, fmt.Errorf("creating a replica of volume %s: %w", vol.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Created replica", "replica", klog.KObj(r), "volume", vol.Name,
		"size", r.Spec.VolumeSize, "hardNodeAffinity", r.Spec.HardNodeAffinity)
	key := client.ObjectKeyFromObject(r)
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, cacheWait, true, func(ctx context.Context) (bool, error) {
		err := c.sim.client.Get(ctx, key, &lhv1.Replica{})
		return err == nil, client.IgnoreNotFound(err)
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for the cache to see the new replica %s: %w", r.Name, err)
	}
	return r, nil
}

// removeOrphans deletes the replicas of the named volume that it owned,
// once the volume is gone or being deleted (vol nil), as Longhorn's volume
// controller and the garbage collector do.
func (c *volumeController) removeOrphans(ctx context.Context, volume string, vol *lhv1.Volume) error {
	list := &lhv1.ReplicaList{}
	if err := c.sim.client.List(ctx, list, client.InNamespace(c.sim.namespace), client.MatchingFields{replicaByVolume: volume}); err != nil {
		return fmt.Errorf("listing the replicas of volume %s: %w", volume, err)
	}
	for i := range list.Items {
		r := &list.Items[i]
		if !r.DeletionTimestamp.IsZero() || !orphaned(r, vol) {
			continue
		}
		if err := c.sim.client.Delete(ctx, r, client.Preconditions{UID: &r.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting replica %s of deleted volume %s: %w", r.Name, volume, err)
		}
		ctrl.LoggerFrom(ctx).Info("Deleted a replica of a deleted volume", "replica", klog.KObj(r), "volume", volume)
	}
	return nil
}

// orphaned reports whether r is owned by a Volume that is not vol: vol nil
// (gone or being deleted) or another volume of the same name. Replicas
// without a Volume owner are never orphans.
func orphaned(r *lhv1.Replica, vol *lhv1.Volume) bool {
	for _, ref := range r.OwnerReferences {
		if ref.Kind != "Volume" || ref.Name != r.Spec.VolumeName {
			continue
		}
		return vol == nil || !vol.DeletionTimestamp.IsZero() || vol.UID != ref.UID
	}
	return false
}

// maxEventNote bounds an Event's note (the events API refuses longer ones).
const maxEventNote = 1000

// truncate shortens s to at most n bytes, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
