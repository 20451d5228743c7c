package diskschedule

import (
	"context"
	"fmt"
	"reflect"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	longhornv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/clusterview"
	"github.com/longhorn/diskschedule/internal/index"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/metrics"
	"github.com/longhorn/diskschedule/internal/settings"
)

// Reconciler decides the requests of every DiskSchedule.
type Reconciler struct {
	client    client.Client
	apiReader client.Reader
	clock     clock.PassiveClock
	metrics   *metrics.Ledger
	workers   int
}

// NewReconciler returns a Reconciler. c reads from the cache and writes to the
// API server; apiReader reads the API server directly, to confirm an owner is
// really gone before its entries are released.
func NewReconciler(c client.Client, apiReader client.Reader, clk clock.PassiveClock, m *metrics.Ledger, workers int) *Reconciler {
	return &Reconciler{client: c, apiReader: apiReader, clock: clk, metrics: m, workers: workers}
}

// +kubebuilder:rbac:groups=longhorn.io,resources=diskschedules,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=longhorn.io,resources=diskschedules/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=longhorn.io,resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=longhorn.io,resources=replicas;backingimages;settings,verbs=get;list;watch

// Reconcile decides every undecided request of one DiskSchedule.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	ds := &longhornv1.DiskSchedule{}
	if err := r.client.Get(ctx, req.NamespacedName, ds); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !ds.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}

	sched, err := clusterview.Settings(ctx, r.client, ds.Namespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	gone, err := r.goneOwners(ctx, ds)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(gone.Replicas)+len(gone.BackingImages) > 0 {
		// Rule 4: release entries whose owner is gone by removing their spec
		// keys; the spec update brings this ledger back with the new generation.
		return ctrl.Result{}, r.releaseGone(ctx, ds, gone)
	}
	running, err := r.runningReplicas(ctx, ds)
	if err != nil {
		return ctrl.Result{}, err
	}

	status, outcome := ledger.Decide(ledger.Input{
		Spec:               ds.Spec,
		Generation:         ds.Generation,
		Previous:           ds.Status,
		Disk:               r.diskFacts(ctx, ds, sched),
		Running:            running,
		ReservationTimeout: sched.NodeReservationTimeout,
		Now:                r.clock.Now(),
	})
	r.observe(ds, status)

	result := ctrl.Result{}
	if !outcome.NextExpiry.IsZero() {
		result.RequeueAfter = max(outcome.NextExpiry.Sub(r.clock.Now()), 0) + 10*time.Millisecond
	}
	if statusEqual(ds.Status, status) {
		return result, nil
	}
	// Update (not a merge patch) carries the resourceVersion the decision was
	// computed from: a concurrent writer makes it fail with a conflict.
	ds.Status = status
	if err := r.client.Status().Update(ctx, ds); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			r.metrics.StatusWrites.WithLabelValues("conflict").Inc()
			return ctrl.Result{Requeue: true}, nil
		}
		r.metrics.StatusWrites.WithLabelValues("error").Inc()
		return ctrl.Result{}, fmt.Errorf("writing the decisions of DiskSchedule %s: %w", ds.Name, err)
	}
	r.metrics.StatusWrites.WithLabelValues("ok").Inc()
	r.count(outcome)
	if outcome.Granted+outcome.Rejected+outcome.Released > 0 {
		log.V(1).Info("Decided ledger requests", "diskSchedule", klog.KObj(ds), "granted", outcome.Granted,
			"rejected", outcome.Rejected, "released", outcome.Released, "adopted", outcome.Adopted,
			"storageScheduled", status.StorageScheduled, "storageLimit", status.StorageLimit)
	}
	return result, nil
}

// diskFacts returns the disk's limit and whether it accepts new requests
// (rules 1 and 8).
func (r *Reconciler) diskFacts(ctx context.Context, ds *longhornv1.DiskSchedule, sched settings.Scheduling) ledger.Disk {
	notSchedulable := func(reason, msg string) ledger.Disk {
		return ledger.Disk{Limit: ds.Status.StorageLimit, Schedulable: false, Reason: reason, Message: msg}
	}
	node := &longhornv1.Node{}
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: ds.Namespace, Name: ds.Spec.NodeID}, node); err != nil {
		return notSchedulable(longhornv1.DiskScheduleReasonDiskNotFound, fmt.Sprintf("node %s not found", ds.Spec.NodeID))
	}
	return Facts(node, ds.Spec.Name, ds.Name, sched)
}

// Facts returns the ledger facts of the named disk of node: its limit and
// whether new requests may be granted, with the reason when not.
func Facts(node *longhornv1.Node, diskName, diskUUID string, sched settings.Scheduling) ledger.Disk {
	spec, inSpec := node.Spec.Disks[diskName]
	status := node.Status.DiskStatus[diskName]
	if !inSpec || status == nil || status.DiskUUID != diskUUID {
		return ledger.Disk{Reason: longhornv1.DiskScheduleReasonDiskNotFound,
			Message: fmt.Sprintf("disk %s with UUID %s is not on node %s", diskName, diskUUID, node.Name)}
	}
	facts := ledger.Disk{
		Limit:       ledger.Limit(status.StorageMaximum, spec.StorageReserved, sched.OverProvisioningPercentage),
		Schedulable: true, Reason: longhornv1.DiskScheduleReasonSchedulable, Message: "new requests can be granted",
	}
	refuse := func(reason, msg string) ledger.Disk {
		facts.Schedulable, facts.Reason, facts.Message = false, reason, msg
		return facts
	}
	switch {
	case !meta.IsStatusConditionTrue(node.Status.Conditions, longhornv1.NodeConditionReady):
		return refuse(longhornv1.DiskScheduleReasonNodeNotReady, fmt.Sprintf("node %s is not ready", node.Name))
	case !meta.IsStatusConditionTrue(node.Status.Conditions, longhornv1.NodeConditionSchedulable):
		return refuse(longhornv1.DiskScheduleReasonNodeUnschedulable, fmt.Sprintf("node %s is not schedulable (cordoned)", node.Name))
	case !node.Spec.AllowScheduling:
		return refuse(longhornv1.DiskScheduleReasonNodeSchedulingDisabled, fmt.Sprintf("scheduling is disabled on node %s", node.Name))
	case node.Spec.EvictionRequested:
		return refuse(longhornv1.DiskScheduleReasonNodeEvictionRequested, fmt.Sprintf("eviction is requested for node %s", node.Name))
	case !spec.AllowScheduling:
		return refuse(longhornv1.DiskScheduleReasonDiskSchedulingDisabled, fmt.Sprintf("scheduling is disabled on disk %s", diskName))
	case spec.EvictionRequested:
		return refuse(longhornv1.DiskScheduleReasonDiskEvictionRequested, fmt.Sprintf("eviction is requested for disk %s", diskName))
	case !meta.IsStatusConditionTrue(status.Conditions, longhornv1.DiskConditionReady):
		return refuse(longhornv1.DiskScheduleReasonDiskNotReady, fmt.Sprintf("disk %s is not ready", diskName))
	}
	return facts
}

// goneOwners returns the entries whose owner object is gone. The cache
// proposes them; a direct read confirms each, so an owner the cache has not
// seen yet is never taken for gone.
func (r *Reconciler) goneOwners(ctx context.Context, ds *longhornv1.DiskSchedule) (ledger.Owners, error) {
	var gone ledger.Owners
	check := func(name string, obj client.Object) (bool, error) {
		key := types.NamespacedName{Namespace: ds.Namespace, Name: name}
		if err := r.client.Get(ctx, key, obj); !apierrors.IsNotFound(err) {
			return false, client.IgnoreNotFound(err)
		}
		err := r.apiReader.Get(ctx, key, obj)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}
	for name := range ds.Spec.Replicas {
		isGone, err := check(name, &longhornv1.Replica{})
		if err != nil {
			return gone, fmt.Errorf("looking up replica %s: %w", name, err)
		}
		if isGone {
			if gone.Replicas == nil {
				gone.Replicas = map[string]bool{}
			}
			gone.Replicas[name] = true
		}
	}
	for name := range ds.Spec.BackingImages {
		isGone, err := check(name, &longhornv1.BackingImage{})
		if err != nil {
			return gone, fmt.Errorf("looking up backing image %s: %w", name, err)
		}
		if isGone {
			if gone.BackingImages == nil {
				gone.BackingImages = map[string]bool{}
			}
			gone.BackingImages[name] = true
		}
	}
	return gone, nil
}

// releaseGone removes the spec keys of gone owners, with an optimistic lock.
func (r *Reconciler) releaseGone(ctx context.Context, ds *longhornv1.DiskSchedule, gone ledger.Owners) error {
	base := ds.DeepCopy()
	for name := range gone.Replicas {
		delete(ds.Spec.Replicas, name)
	}
	for name := range gone.BackingImages {
		delete(ds.Spec.BackingImages, name)
	}
	err := r.client.Patch(ctx, ds, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil // the watch brings the new version back
	}
	if err != nil {
		return fmt.Errorf("releasing entries of gone owners from DiskSchedule %s: %w", ds.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Released ledger entries of gone owners", "diskSchedule", klog.KObj(ds),
		"replicas", len(gone.Replicas), "backingImages", len(gone.BackingImages))
	return nil
}

// runningReplicas names the replicas already running on this disk, whose
// requests are adopted (rule 7).
func (r *Reconciler) runningReplicas(ctx context.Context, ds *longhornv1.DiskSchedule) (map[string]bool, error) {
	list := &longhornv1.ReplicaList{}
	if err := r.client.List(ctx, list, client.InNamespace(ds.Namespace), client.MatchingFields{index.ReplicaByDisk: ds.Name}); err != nil {
		return nil, fmt.Errorf("listing replicas on disk %s: %w", ds.Name, err)
	}
	running := map[string]bool{}
	for i := range list.Items {
		if list.Items[i].Status.CurrentState == longhornv1.ReplicaStateRunning {
			running[list.Items[i].Name] = true
		}
	}
	return running, nil
}

func (r *Reconciler) observe(ds *longhornv1.DiskSchedule, status longhornv1.DiskScheduleStatus) {
	labels := []string{ds.Spec.NodeID, ds.Spec.Name}
	r.metrics.StorageScheduled.WithLabelValues(labels...).Set(float64(status.StorageScheduled))
	r.metrics.StorageLimit.WithLabelValues(labels...).Set(float64(status.StorageLimit))
	pending := len(ds.Spec.Replicas) + len(ds.Spec.BackingImages) + len(ds.Spec.Reservations) -
		len(ds.Status.Replicas) - len(ds.Status.BackingImages) - len(ds.Status.Reservations)
	r.metrics.Pending.WithLabelValues(labels...).Set(float64(max(pending, 0)))
}

func (r *Reconciler) count(o ledger.Outcome) {
	r.metrics.Decisions.WithLabelValues("granted").Add(float64(o.Granted - o.Adopted))
	r.metrics.Decisions.WithLabelValues("adopted").Add(float64(o.Adopted))
	r.metrics.Decisions.WithLabelValues("rejected").Add(float64(o.Rejected))
	r.metrics.Decisions.WithLabelValues("released").Add(float64(o.Released))
}

// statusEqual compares statuses ignoring condition timestamps, which
// meta.SetStatusCondition keeps when nothing else changed.
func statusEqual(a, b longhornv1.DiskScheduleStatus) bool {
	return reflect.DeepEqual(a, b)
}

// SetupWithManager registers the controller: it reconciles on DiskSchedule
// changes, on changes of the disk's Node, on setting changes (every ledger)
// and on replica changes (adoption and release).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&longhornv1.DiskSchedule{}).
		Watches(&longhornv1.Node{}, handler.EnqueueRequestsFromMapFunc(r.forNode)).
		Watches(&longhornv1.Setting{}, handler.EnqueueRequestsFromMapFunc(r.forSetting)).
		Watches(&longhornv1.Replica{}, handler.EnqueueRequestsFromMapFunc(forReplica)).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.workers}).
		Named("diskschedule").
		Complete(r)
}

func (r *Reconciler) forNode(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.list(ctx, client.InNamespace(obj.GetNamespace()), client.MatchingFields{index.DiskScheduleByNode: obj.GetName()})
}

func (r *Reconciler) forSetting(ctx context.Context, obj client.Object) []reconcile.Request {
	switch obj.GetName() {
	case longhornv1.SettingStorageOverProvisioningPercentage, longhornv1.SettingSchedulerExtenderNodeReservationTimeout:
		return r.list(ctx, client.InNamespace(obj.GetNamespace()))
	}
	return nil
}

func forReplica(_ context.Context, obj client.Object) []reconcile.Request {
	replica := obj.(*longhornv1.Replica)
	if replica.Spec.DiskID == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: replica.Namespace, Name: replica.Spec.DiskID}}}
}

func (r *Reconciler) list(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
	list := &longhornv1.DiskScheduleList{}
	if err := r.client.List(ctx, list, opts...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing DiskSchedules to reconcile")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}
