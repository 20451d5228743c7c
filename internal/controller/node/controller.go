package node

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	longhornv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/clusterview"
	"github.com/longhorn/diskschedule/internal/index"
	"github.com/longhorn/diskschedule/internal/nodestatus"
	"github.com/longhorn/diskschedule/internal/placement"
	"github.com/longhorn/diskschedule/internal/settings"
)

// LabelNode labels each DiskSchedule with the name of its node.
const LabelNode = "longhorn.io/node"

// Event reasons of the node controller.
const (
	// ReasonDiskStillAllocated: a disk left the node while its ledger still grants space.
	ReasonDiskStillAllocated = "DiskStillAllocated"
	// ReasonDiskScheduleCreated: a ledger was created for a new disk.
	ReasonDiskScheduleCreated = "DiskScheduleCreated"
	// ReasonDiskScheduleDeleted: the ledger of a removed disk was deleted.
	ReasonDiskScheduleDeleted = "DiskScheduleDeleted"
)

// Reconciler reconciles Longhorn Nodes.
type Reconciler struct {
	client    client.Client
	recorder  events.EventRecorder
	clock     clock.PassiveClock
	namespace string
}

// NewReconciler returns a node Reconciler for the Nodes in namespace.
func NewReconciler(c client.Client, recorder events.EventRecorder, clk clock.PassiveClock, namespace string) *Reconciler {
	return &Reconciler{client: c, recorder: recorder, clock: clk, namespace: namespace}
}

// +kubebuilder:rbac:groups=longhorn.io,resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=longhorn.io,resources=nodes/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=longhorn.io,resources=diskschedules,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=longhorn.io,resources=replicas;settings,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch

// Reconcile brings one Node's ledgers and derived status up to date.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	node := &longhornv1.Node{}
	if err := r.client.Get(ctx, req.NamespacedName, node); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !node.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // the DiskSchedules go with it, by owner reference
	}
	sched, err := clusterview.Settings(ctx, r.client, node.Namespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	ledgers, err := r.syncDiskSchedules(ctx, node)
	if err != nil {
		return ctrl.Result{}, err
	}
	kubeNode := &corev1.Node{}
	if err := r.client.Get(ctx, types.NamespacedName{Name: node.Name}, kubeNode); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("getting Kubernetes node %s: %w", node.Name, err)
		}
		kubeNode = nil
	}
	status := DerivedStatus(node, kubeNode, ledgers, sched, metav1.NewTime(r.clock.Now()))
	if err := nodestatus.Apply(ctx, r.client, node.Namespace, node.Name, nodestatus.NodeControllerManager, status); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}

// syncDiskSchedules creates a DiskSchedule for every disk with a UUID and
// deletes those of disks that are gone, unless they still grant space. It
// returns the node's ledgers by disk UUID.
func (r *Reconciler) syncDiskSchedules(ctx context.Context, node *longhornv1.Node) (map[string]*longhornv1.DiskSchedule, error) {
	log := ctrl.LoggerFrom(ctx)
	list := &longhornv1.DiskScheduleList{}
	if err := r.client.List(ctx, list, client.InNamespace(node.Namespace), client.MatchingFields{index.DiskScheduleByNode: node.Name}); err != nil {
		return nil, fmt.Errorf("listing the DiskSchedules of node %s: %w", node.Name, err)
	}
	existing := map[string]*longhornv1.DiskSchedule{}
	for i := range list.Items {
		existing[list.Items[i].Name] = &list.Items[i]
	}
	wanted := map[string]string{} // UUID -> disk name
	for name, ds := range node.Status.DiskStatus {
		if _, inSpec := node.Spec.Disks[name]; inSpec && ds != nil && ds.DiskUUID != "" {
			wanted[ds.DiskUUID] = name
		}
	}

	for _, uuid := range sortedKeys(wanted) {
		if cur, ok := existing[uuid]; ok && cur.Spec.Name == wanted[uuid] {
			continue
		}
		ds, err := r.createDiskSchedule(ctx, node, uuid, wanted[uuid])
		if err != nil {
			return nil, err
		}
		if ds != nil {
			existing[uuid] = ds
		}
	}
	for _, uuid := range sortedKeys(existing) {
		ds := existing[uuid]
		if name, ok := wanted[uuid]; ok && name == ds.Spec.Name {
			continue
		}
		if ds.Status.StorageScheduled > 0 {
			msg := fmt.Sprintf("disk %s (UUID %s) left node %s while its ledger still grants %d bytes; the DiskSchedule is kept until its replicas are gone",
				ds.Spec.Name, uuid, node.Name, ds.Status.StorageScheduled)
			r.recorder.Eventf(node, ds, corev1.EventTypeWarning, ReasonDiskStillAllocated, "RemoveDisk", "%s", msg)
			log.Info("Keeping the ledger of a removed disk that still grants space", "diskSchedule", klog.KObj(ds),
				"storageScheduled", ds.Status.StorageScheduled)
			continue
		}
		if err := r.client.Delete(ctx, ds, client.Preconditions{ResourceVersion: &ds.ResourceVersion}); err != nil && !apierrors.IsNotFound(err) {
			if apierrors.IsConflict(err) {
				return nil, fmt.Errorf("deleting DiskSchedule %s: it changed meanwhile: %w", uuid, err)
			}
			return nil, fmt.Errorf("deleting DiskSchedule %s: %w", uuid, err)
		}
		delete(existing, uuid)
		r.recorder.Eventf(node, ds, corev1.EventTypeNormal, ReasonDiskScheduleDeleted, "RemoveDisk",
			"Deleted the ledger of disk %s (UUID %s)", ds.Spec.Name, uuid)
	}
	return existing, nil
}

// createDiskSchedule creates the ledger of one disk, with a request for every
// replica already placed on it so that they are adopted (ledger rule 7).
func (r *Reconciler) createDiskSchedule(ctx context.Context, node *longhornv1.Node, uuid, diskName string) (*longhornv1.DiskSchedule, error) {
	replicas := &longhornv1.ReplicaList{}
	if err := r.client.List(ctx, replicas, client.InNamespace(node.Namespace), client.MatchingFields{index.ReplicaByDisk: uuid}); err != nil {
		return nil, fmt.Errorf("listing replicas on disk %s: %w", uuid, err)
	}
	ds := &longhornv1.DiskSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: uuid, Namespace: node.Namespace, Labels: map[string]string{LabelNode: node.Name}},
		Spec:       longhornv1.DiskScheduleSpec{Name: diskName, NodeID: node.Name},
	}
	for i := range replicas.Items {
		rep := &replicas.Items[i]
		if rep.DeletionTimestamp.IsZero() && rep.Spec.NodeID == node.Name && rep.Spec.VolumeSize > 0 {
			if ds.Spec.Replicas == nil {
				ds.Spec.Replicas = map[string]longhornv1.RequestedBytes{}
			}
			ds.Spec.Replicas[rep.Name] = longhornv1.RequestedBytes(rep.Spec.VolumeSize)
		}
	}
	if err := controllerutil.SetControllerReference(node, ds, r.client.Scheme()); err != nil {
		return nil, fmt.Errorf("owning DiskSchedule %s by node %s: %w", uuid, node.Name, err)
	}
	if err := r.client.Create(ctx, ds); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// Another disk name with this UUID, or a cache that lags: the
			// next reconcile sees it.
			return nil, nil
		}
		return nil, fmt.Errorf("creating DiskSchedule %s for disk %s: %w", uuid, diskName, err)
	}
	r.recorder.Eventf(node, ds, corev1.EventTypeNormal, ReasonDiskScheduleCreated, "AddDisk",
		"Created the ledger of disk %s (UUID %s) with %d existing replicas", diskName, uuid, len(ds.Spec.Replicas))
	return ds, nil
}

// DerivedStatus returns the Node status fields the node controller owns:
// zone, region, Ready and Schedulable, and per disk the Schedulable condition
// and the mirrors of its ledger.
func DerivedStatus(node *longhornv1.Node, kubeNode *corev1.Node, ledgers map[string]*longhornv1.DiskSchedule,
	sched settings.Scheduling, now metav1.Time) longhornv1.NodeStatus {
	out := longhornv1.NodeStatus{}
	ready := nodestatus.Condition(node.Status.Conditions, longhornv1.NodeConditionReady, metav1.ConditionFalse,
		longhornv1.NodeReasonKubernetesNodeGone, fmt.Sprintf("Kubernetes node %s not found", node.Name), now)
	schedulable := nodestatus.Condition(node.Status.Conditions, longhornv1.NodeConditionSchedulable, metav1.ConditionTrue,
		longhornv1.NodeReasonSchedulable, "replicas may be placed on the node", now)
	if kubeNode != nil {
		out.Zone = kubeNode.Labels[corev1.LabelTopologyZone]
		out.Region = kubeNode.Labels[corev1.LabelTopologyRegion]
		if kubeNodeReady(kubeNode) {
			ready = nodestatus.Condition(node.Status.Conditions, longhornv1.NodeConditionReady, metav1.ConditionTrue,
				longhornv1.NodeReasonKubernetesNodeReady, "Kubernetes node is ready", now)
		} else {
			ready = nodestatus.Condition(node.Status.Conditions, longhornv1.NodeConditionReady, metav1.ConditionFalse,
				longhornv1.NodeReasonKubernetesNodeNotReady, fmt.Sprintf("Kubernetes node %s is not ready", node.Name), now)
		}
		if kubeNode.Spec.Unschedulable && sched.DisableSchedulingOnCordonedNode {
			schedulable = nodestatus.Condition(node.Status.Conditions, longhornv1.NodeConditionSchedulable, metav1.ConditionFalse,
				longhornv1.NodeReasonKubernetesNodeCordoned,
				fmt.Sprintf("Kubernetes node %s is cordoned and %s is true", node.Name, longhornv1.SettingDisableSchedulingOnCordonedNode), now)
		}
	}
	out.Conditions = []metav1.Condition{ready, schedulable}

	for name, disk := range node.Status.DiskStatus {
		if disk == nil || disk.DiskUUID == "" {
			continue
		}
		if _, inSpec := node.Spec.Disks[name]; !inSpec {
			continue
		}
		mine := &longhornv1.DiskStatus{Conditions: []metav1.Condition{diskSchedulable(disk, sched, now)}}
		if ds := ledgers[disk.DiskUUID]; ds != nil {
			mine.StorageScheduled = ds.Status.StorageScheduled
			mine.ScheduledReplica = granted(ds.Status.Replicas)
			mine.ScheduledBackingImage = granted(ds.Status.BackingImages)
		}
		if out.DiskStatus == nil {
			out.DiskStatus = map[string]*longhornv1.DiskStatus{}
		}
		out.DiskStatus[name] = mine
	}
	return out
}

// diskSchedulable is the actual-space check: the disk's actual free space
// must stay above storage-minimal-available-percentage of its maximum.
func diskSchedulable(disk *longhornv1.DiskStatus, sched settings.Scheduling, now metav1.Time) metav1.Condition {
	if !meta.IsStatusConditionTrue(disk.Conditions, longhornv1.DiskConditionReady) {
		return nodestatus.Condition(disk.Conditions, longhornv1.DiskConditionSchedulable, metav1.ConditionFalse,
			longhornv1.DiskReasonDiskNotReady, "the disk is not ready", now)
	}
	// The same rounding as the placement policy's actual-space check, so the
	// condition and the policy agree at the boundary.
	minimal := placement.MinimalAvailable(disk.StorageMaximum, sched.MinimalAvailablePercentage)
	if disk.StorageAvailable <= minimal {
		return nodestatus.Condition(disk.Conditions, longhornv1.DiskConditionSchedulable, metav1.ConditionFalse,
			longhornv1.DiskReasonDiskPressure,
			fmt.Sprintf("%d bytes available, not above %d%% of %d bytes (%s=%d)", disk.StorageAvailable,
				sched.MinimalAvailablePercentage, disk.StorageMaximum, longhornv1.SettingStorageMinimalAvailablePercentage,
				sched.MinimalAvailablePercentage), now)
	}
	return nodestatus.Condition(disk.Conditions, longhornv1.DiskConditionSchedulable, metav1.ConditionTrue,
		longhornv1.DiskReasonSchedulable, "the disk has enough actual free space", now)
}

func kubeNodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func granted(entries map[string]longhornv1.RequestStatus) map[string]int64 {
	var out map[string]int64
	for name, st := range entries {
		if st.ScheduledSize > 0 {
			if out == nil {
				out = map[string]int64{}
			}
			out[name] = st.ScheduledSize
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// SetupWithManager registers the controller. It reconciles a Node on changes
// of the Node, its Kubernetes node, its DiskSchedules (owner), and settings.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	toNode := func(_ context.Context, obj client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: r.namespace, Name: obj.GetName()}}}
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&longhornv1.Node{}).
		Owns(&longhornv1.DiskSchedule{}).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(toNode)).
		Watches(&longhornv1.Setting{}, handler.EnqueueRequestsFromMapFunc(r.forSetting)).
		Named("node").
		Complete(r)
}

func (r *Reconciler) forSetting(ctx context.Context, obj client.Object) []reconcile.Request {
	switch obj.GetName() {
	case longhornv1.SettingDisableSchedulingOnCordonedNode, longhornv1.SettingStorageMinimalAvailablePercentage:
	default:
		return nil
	}
	list := &longhornv1.NodeList{}
	if err := r.client.List(ctx, list, client.InNamespace(obj.GetNamespace())); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing nodes to reconcile")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}
