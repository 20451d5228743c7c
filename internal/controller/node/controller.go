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
	// ReasonDiskScheduleMismatch: a ledger named by a disk's UUID said
	// another node or disk name than Longhorn reports for that UUID, and
	// was replaced by the disk's own ledger, its requests carried over.
	ReasonDiskScheduleMismatch = "DiskScheduleMismatch"
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
		name, ok := wanted[uuid]
		if ok && name == ds.Spec.Name {
			continue
		}
		var err error
		if ok {
			err = r.mismatched(ctx, node, ds, name) // the UUID is this node's, under another name
		} else {
			err = r.removed(ctx, node, ds)
		}
		if err != nil {
			return ctrl.Result{}, err
		}
	}
	for _, uuid := range slices.Sorted(maps.Keys(wanted)) {
		if _, ok := existing[uuid]; ok {
			continue // kept, or not deleted yet: created once the old one is gone
		}
		if err := r.ensure(ctx, node, uuid, wanted[uuid]); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

// ensure creates the ledger of the disk diskName of node with UUID uuid,
// and replaces the DiskSchedule of that name that says another node
// (mismatched).
func (r *Reconciler) ensure(ctx context.Context, node *lhv1.Node, uuid, diskName string) error {
	err := r.create(ctx, node, uuid, diskName, dsv1.DiskScheduleSpec{})
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	ds := &dsv1.DiskSchedule{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: node.Namespace, Name: uuid}, ds); err != nil {
		// Not in the cache yet: reconciled again once it is.
		return fmt.Errorf("reading DiskSchedule %s, which exists: %w", uuid, err)
	}
	if ds.Spec.NodeID == node.Name {
		return nil // the cache lags: the watch brings it back to this node
	}
	return r.mismatched(ctx, node, ds, diskName)
}

// mismatched handles ds, named by the UUID that Longhorn reports for the
// disk diskName of node, whose spec names another node or disk (written by
// hand, or left from a disk that moved): the disk's requests would be
// decided against a disk that is not there, and refused. Since spec.nodeID
// and spec.name are immutable, ds is replaced: deleted at the version read
// (a write that lands meanwhile fails the delete, and the next reconcile
// sees it), then created again for the right node and disk, with every
// request of its spec carried over. The DiskSchedule controller decides
// them again: what Longhorn persisted on the disk is adopted (rule 7),
// even over the limit, so the ledger never loses track of it; the mirror
// releases the rest (rule 10). A ds whose own node does report the UUID
// under its disk name (one UUID on two disks, which Longhorn marks not
// ready) is left alone.
func (r *Reconciler) mismatched(ctx context.Context, node *lhv1.Node, ds *dsv1.DiskSchedule, diskName string) error {
	log := ctrl.LoggerFrom(ctx)
	if !ds.DeletionTimestamp.IsZero() {
		return nil
	}
	claimed := &lhv1.Node{}
	err := r.client.Get(ctx, client.ObjectKey{Namespace: node.Namespace, Name: ds.Spec.NodeID}, claimed)
	switch {
	case err == nil:
		if st := claimed.Status.DiskStatus[ds.Spec.Name]; st != nil && st.DiskUUID == ds.Name {
			log.Info("Leaving a ledger whose disk UUID two disks report", "diskSchedule", klog.KObj(ds),
				"node", ds.Spec.NodeID, "disk", ds.Spec.Name, "alsoNode", node.Name, "alsoDisk", diskName)
			return nil
		}
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("reading Longhorn node %s, which DiskSchedule %s names: %w", ds.Spec.NodeID, ds.Name, err)
	}
	requests := len(ds.Spec.Replicas) + len(ds.Spec.BackingImages) + len(ds.Spec.Reservations)
	log.Info("Replacing a ledger that says another node or disk than Longhorn reports for its UUID", "diskSchedule", klog.KObj(ds),
		"specNode", ds.Spec.NodeID, "specDisk", ds.Spec.Name, "node", node.Name, "disk", diskName,
		"storageScheduled", ds.Status.StorageScheduled, "requests", requests)
	r.recorder.Eventf(ds, node, corev1.EventTypeWarning, ReasonDiskScheduleMismatch, "ReplaceLedger",
		"DiskSchedule %s says disk %s of node %s, but Longhorn reports UUID %s for disk %s of node %s: replaced by that disk's ledger, its %d requests carried over and decided again (%d bytes were granted)",
		ds.Name, ds.Spec.Name, ds.Spec.NodeID, ds.Name, diskName, node.Name, requests, ds.Status.StorageScheduled)
	err = r.client.Delete(ctx, ds, client.Preconditions{ResourceVersion: ptr.To(ds.ResourceVersion)})
	switch {
	case apierrors.IsConflict(err):
		return fmt.Errorf("replacing DiskSchedule %s: it changed meanwhile: %w", ds.Name, err)
	case err != nil && !apierrors.IsNotFound(err):
		return fmt.Errorf("replacing DiskSchedule %s: deleting it: %w", ds.Name, err)
	}
	carried := dsv1.DiskScheduleSpec{Replicas: ds.Spec.Replicas, BackingImages: ds.Spec.BackingImages,
		Reservations: ds.Spec.Reservations, ReplicaVersions: ds.Spec.ReplicaVersions}
	if err := r.create(ctx, node, ds.Name, diskName, carried); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// Deleted and created again by someone else meanwhile:
			// the next reconcile looks at it.
			return fmt.Errorf("replacing DiskSchedule %s: %w", ds.Name, err)
		}
		return err
	}
	return nil
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

// create creates the ledger of one disk with the requests of carried
// (empty for a new disk; the mirror fills it with what Longhorn has
// persisted there). It returns the API server's AlreadyExists error as
// it is.
func (r *Reconciler) create(ctx context.Context, node *lhv1.Node, uuid, diskName string, carried dsv1.DiskScheduleSpec) error {
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
		Spec: carried,
	}
	ds.Spec.Name, ds.Spec.NodeID = diskName, node.Name
	if err := r.client.Create(ctx, ds); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return err
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
