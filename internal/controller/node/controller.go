package node

import (
	"context"
	"fmt"
	"maps"
	"slices"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/index"
)

// LabelNode labels each DiskSchedule with the name of its node.
const LabelNode = "longhorn.io/node"

// Event reasons of the node controller, on DiskSchedules.
const (
	// ReasonDiskStillAllocated: a disk left its node while its ledger still grants space.
	ReasonDiskStillAllocated = "DiskStillAllocated"
	// ReasonDiskScheduleCreated: a ledger was created for a new disk.
	ReasonDiskScheduleCreated = "DiskScheduleCreated"
	// ReasonDiskScheduleDeleted: the ledger of a removed disk was deleted.
	ReasonDiskScheduleDeleted = "DiskScheduleDeleted"
)

// Reconciler keeps the DiskSchedules of Longhorn Nodes.
type Reconciler struct {
	client   client.Client
	recorder events.EventRecorder
}

// NewReconciler returns a node Reconciler; c reads from the manager's cache
// and writes DiskSchedules.
func NewReconciler(c client.Client, recorder events.EventRecorder) *Reconciler {
	return &Reconciler{client: c, recorder: recorder}
}

// +kubebuilder:rbac:groups=longhorn.io,namespace=longhorn-system,resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=longhorn.io,namespace=longhorn-system,resources=diskschedules,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=events.k8s.io,namespace=longhorn-system,resources=events,verbs=create;patch

// Reconcile creates the ledgers of a Node's new disks and deletes those of
// disks that are gone and grant nothing.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	node := &lhv1.Node{}
	if err := r.client.Get(ctx, req.NamespacedName, node); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("reading Longhorn node %s: %w", req.Name, err)
		}
		node = nil // every ledger of the node is of a disk that is gone
	}
	list := &dsv1.DiskScheduleList{}
	if err := r.client.List(ctx, list, client.InNamespace(req.Namespace), client.MatchingFields{index.DiskScheduleByNode: req.Name}); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing the DiskSchedules of node %s: %w", req.Name, err)
	}
	existing := map[string]*dsv1.DiskSchedule{}
	for i := range list.Items {
		existing[list.Items[i].Name] = &list.Items[i]
	}
	wanted := Disks(node)

	for _, uuid := range slices.Sorted(maps.Keys(existing)) {
		ds := existing[uuid]
		if name, ok := wanted[uuid]; ok && name == ds.Spec.Name {
			continue
		}
		if err := r.removed(ctx, node, ds); err != nil {
			return ctrl.Result{}, err
		}
	}
	for _, uuid := range slices.Sorted(maps.Keys(wanted)) {
		if _, ok := existing[uuid]; ok {
			continue // kept, or not deleted yet: created once the old one is gone
		}
		if err := r.create(ctx, node, uuid, wanted[uuid]); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

// Disks returns the disks of node that have a ledger, disk UUID → disk
// name: every status.diskStatus entry with a UUID. A UUID reported under two
// names (Longhorn marks such disks not ready) goes with the first name.
func Disks(node *lhv1.Node) map[string]string {
	out := map[string]string{}
	if node == nil || !node.DeletionTimestamp.IsZero() {
		return out
	}
	for _, name := range slices.Sorted(maps.Keys(node.Status.DiskStatus)) {
		st := node.Status.DiskStatus[name]
		if st == nil || st.DiskUUID == "" {
			continue
		}
		if _, dup := out[st.DiskUUID]; !dup {
			out[st.DiskUUID] = name
		}
	}
	return out
}

// Granting reports whether ds still holds or asks for space: a granted
// byte, or a replica or backing-image entry in its spec.
func Granting(ds *dsv1.DiskSchedule) bool {
	return ds.Status.StorageScheduled > 0 || len(ds.Spec.Replicas) > 0 || len(ds.Spec.BackingImages) > 0
}

// removed handles the ledger of a disk that left its node: deleted when it
// grants nothing, kept with a Warning Event otherwise.
func (r *Reconciler) removed(ctx context.Context, node *lhv1.Node, ds *dsv1.DiskSchedule) error {
	log := ctrl.LoggerFrom(ctx)
	if !ds.DeletionTimestamp.IsZero() {
		return nil
	}
	if Granting(ds) {
		r.recorder.Eventf(ds, related(node), corev1.EventTypeWarning, ReasonDiskStillAllocated, "RemoveDisk",
			"Disk %s (UUID %s) left node %s while its ledger still grants %d bytes to %d replicas and %d backing images; it is kept until they are released",
			ds.Spec.Name, ds.Name, ds.Spec.NodeID, ds.Status.StorageScheduled, len(ds.Spec.Replicas), len(ds.Spec.BackingImages))
		log.Info("Keeping the ledger of a removed disk that still grants space", "diskSchedule", klog.KObj(ds),
			"storageScheduled", ds.Status.StorageScheduled, "replicas", len(ds.Spec.Replicas), "backingImages", len(ds.Spec.BackingImages))
		return nil
	}
	// The precondition makes a write that landed meanwhile (a new request)
	// fail the delete; the watch brings the ledger back.
	err := r.client.Delete(ctx, ds, client.Preconditions{ResourceVersion: ptr.To(ds.ResourceVersion)})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		return fmt.Errorf("deleting DiskSchedule %s: it changed meanwhile: %w", ds.Name, err)
	case err != nil:
		return fmt.Errorf("deleting DiskSchedule %s: %w", ds.Name, err)
	}
	log.Info("Deleted the ledger of a removed disk", "diskSchedule", klog.KObj(ds), "disk", ds.Spec.Name)
	r.recorder.Eventf(ds, related(node), corev1.EventTypeNormal, ReasonDiskScheduleDeleted, "RemoveDisk",
		"Deleted the ledger of disk %s (UUID %s) of node %s", ds.Spec.Name, ds.Name, ds.Spec.NodeID)
	return nil
}

// create creates the empty ledger of one disk; the mirror fills it with
// what Longhorn has persisted there.
func (r *Reconciler) create(ctx context.Context, node *lhv1.Node, uuid, diskName string) error {
	ds := &dsv1.DiskSchedule{
		ObjectMeta: metav1.ObjectMeta{
			Name: uuid, Namespace: node.Namespace,
			Labels: map[string]string{LabelNode: node.Name},
			// A plain controller reference: no blockOwnerDeletion, which
			// would need a write permission on Longhorn's nodes/finalizers.
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: lhv1.SchemeGroupVersion.String(), Kind: "Node",
				Name: node.Name, UID: node.UID, Controller: ptr.To(true),
			}},
		},
		Spec: dsv1.DiskScheduleSpec{Name: diskName, NodeID: node.Name},
	}
	if err := r.client.Create(ctx, ds); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// The cache lags, or another node reports the UUID: the watch
			// brings the existing ledger back.
			return nil
		}
		return fmt.Errorf("creating DiskSchedule %s for disk %s of node %s: %w", uuid, diskName, node.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Created the ledger of a disk", "diskSchedule", klog.KObj(ds), "disk", diskName)
	r.recorder.Eventf(ds, node, corev1.EventTypeNormal, ReasonDiskScheduleCreated, "AddDisk",
		"Created the ledger of disk %s (UUID %s) of node %s", diskName, uuid, node.Name)
	return nil
}

// related returns node as an Event's related object, or nil when it is gone.
func related(node *lhv1.Node) client.Object {
	if node == nil {
		return nil
	}
	return node
}

// SetupWithManager registers the controller. It reconciles a Node when the
// Node or one of its DiskSchedules changes (a kept ledger is deleted once
// its last grant is released).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&lhv1.Node{}, builder.WithPredicates(disksChanged())).
		Owns(&dsv1.DiskSchedule{}, builder.WithPredicates(ledgerLifeChanged())).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Named("node").
		Complete(r)
}

// workers is how many nodes are reconciled at once: at a cluster's first
// start every disk's ledger is created, one API call each.
const workers = 8

// disksChanged lets through the Longhorn Node events that can change what
// Reconcile does: a node's disks (Disks) or its deletion. Longhorn rewrites
// a Node's status for every disk measurement and every replica it counts.
func disksChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		oldNode, okOld := e.ObjectOld.(*lhv1.Node)
		newNode, okNew := e.ObjectNew.(*lhv1.Node)
		if !okOld || !okNew {
			return true
		}
		return !maps.Equal(Disks(oldNode), Disks(newNode)) || oldNode.DeletionTimestamp.IsZero() != newNode.DeletionTimestamp.IsZero()
	}}
}

// ledgerLifeChanged lets through the DiskSchedule events that can change
// what Reconcile does: a ledger created or deleted, its disk name, or
// whether it still grants space (Granting). Every decision of the ledger
// controller rewrites a ledger's status.
func ledgerLifeChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		oldDS, okOld := e.ObjectOld.(*dsv1.DiskSchedule)
		newDS, okNew := e.ObjectNew.(*dsv1.DiskSchedule)
		if !okOld || !okNew {
			return true
		}
		return Granting(oldDS) != Granting(newDS) || oldDS.Spec.Name != newDS.Spec.Name ||
			oldDS.DeletionTimestamp.IsZero() != newDS.DeletionTimestamp.IsZero()
	}}
}
