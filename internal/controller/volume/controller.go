package volume

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	longhornv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/clusterview"
	"github.com/longhorn/diskschedule/internal/ledgerclient"
	"github.com/longhorn/diskschedule/internal/placement"
	"github.com/longhorn/diskschedule/internal/settings"
)

// LabelVolume labels each Replica with its volume's name, as Longhorn does.
const LabelVolume = "longhornvolume"

// retryUnscheduled is how soon a volume that could not be placed is tried
// again when no ledger, node or setting change brings it back sooner.
const retryUnscheduled = 30 * time.Second

// Reconciler places the replicas of every Volume through the ledgers.
type Reconciler struct {
	client    client.Client
	apiReader client.Reader
	recorder  events.EventRecorder
	workers   int
}

// NewReconciler returns a volume Reconciler.
func NewReconciler(c client.Client, apiReader client.Reader, recorder events.EventRecorder, workers int) *Reconciler {
	return &Reconciler{client: c, apiReader: apiReader, recorder: recorder, workers: workers}
}

// scope is what one reconcile of a volume reads.
type scope struct {
	volume   *longhornv1.Volume
	sched    settings.Scheduling
	nodes    []longhornv1.Node
	ledgers  map[string]*longhornv1.DiskSchedule
	replicas []*longhornv1.Replica
	// size is the size in effect (status.currentSize, or spec.size before the first allocation).
	size int64
	// placeFailure is the placement policy's reason when some replica found no disk.
	placeFailure *placement.Result
	// pending and rejected name replicas whose requests are not granted, for DiskAllocation.
	pending, rejected []string
}

// +kubebuilder:rbac:groups=longhorn.io,resources=volumes,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=longhorn.io,resources=volumes/finalizers,verbs=update
// +kubebuilder:rbac:groups=longhorn.io,resources=volumes/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=longhorn.io,resources=replicas,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=longhorn.io,resources=replicas/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=longhorn.io,resources=diskschedules,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=longhorn.io,resources=nodes;settings,verbs=get;list;watch
// +kubebuilder:rbac:groups=longhorn.io,resources=backingimages,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings one volume's replicas and their allocations up to date.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	vol := &longhornv1.Volume{}
	if err := r.client.Get(ctx, req.NamespacedName, vol); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	s, err := r.load(ctx, vol)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !vol.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, s)
	}
	if controllerutil.AddFinalizer(vol, longhornv1.ReplicaFinalizer) {
		if err := r.client.Update(ctx, vol); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding the finalizer to volume %s: %w", vol.Name, err)
		}
	}
	for _, phase := range []func(context.Context, *scope) error{
		r.ensureReplicas, r.checkAllocations, r.placeReplicas, r.expand, r.removeSurplus,
	} {
		if err := phase(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := r.writeStatus(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	switch {
	case s.placeFailure != nil && s.placeFailure.Reason != placement.ReasonWaitingForAttachment:
		return ctrl.Result{RequeueAfter: retryUnscheduled}, nil
	case len(s.pending) > 0:
		return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
	}
	return ctrl.Result{}, nil
}

// finalize deletes the volume's replicas (whose own finalizers release their
// ledger requests) and lets the volume go once none is left. It does not
// rely on the garbage collector, which not every control plane runs.
func (r *Reconciler) finalize(ctx context.Context, s *scope) error {
	if !controllerutil.ContainsFinalizer(s.volume, longhornv1.ReplicaFinalizer) {
		return nil
	}
	all := &longhornv1.ReplicaList{}
	if err := r.apiReader.List(ctx, all, client.InNamespace(s.volume.Namespace), client.MatchingLabels{LabelVolume: s.volume.Name}); err != nil {
		return fmt.Errorf("listing the replicas of deleted volume %s: %w", s.volume.Name, err)
	}
	for i := range all.Items {
		if err := r.client.Delete(ctx, &all.Items[i]); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting replica %s: %w", all.Items[i].Name, err)
		}
	}
	if len(all.Items) > 0 {
		return nil // the replicas' deletion brings the volume back (Owns)
	}
	controllerutil.RemoveFinalizer(s.volume, longhornv1.ReplicaFinalizer)
	if err := r.client.Update(ctx, s.volume); err != nil {
		return client.IgnoreNotFound(err)
	}
	return nil
}

func (r *Reconciler) load(ctx context.Context, vol *longhornv1.Volume) (*scope, error) {
	view, err := clusterview.Load(ctx, r.client, vol.Namespace)
	if err != nil {
		return nil, err
	}
	s := &scope{volume: vol, sched: view.Settings, nodes: view.Nodes, ledgers: view.Ledgers}
	// Replicas are read from the API server, not the cache: a replica created
	// by the previous reconcile must be seen, or it would be created twice.
	repList := &longhornv1.ReplicaList{}
	if err := r.apiReader.List(ctx, repList, client.InNamespace(vol.Namespace), client.MatchingLabels{LabelVolume: vol.Name}); err != nil {
		return nil, fmt.Errorf("listing the replicas of volume %s: %w", vol.Name, err)
	}
	for i := range repList.Items {
		if repList.Items[i].DeletionTimestamp.IsZero() {
			s.replicas = append(s.replicas, &repList.Items[i])
		}
	}
	sort.Slice(s.replicas, func(i, j int) bool { return s.replicas[i].Name < s.replicas[j].Name })
	s.size = vol.Status.CurrentSize.Value()
	if s.size == 0 {
		s.size = vol.Spec.Size.Value()
	}
	return s, nil
}

// ensureReplicas creates replicas until the volume has numberOfReplicas of
// them, plus one for data locality while a best-effort volume has no
// replica on its attached node.
func (r *Reconciler) ensureReplicas(ctx context.Context, s *scope) error {
	want := s.volume.Spec.NumberOfReplicas
	if want <= 0 {
		want = 1
	}
	for len(s.replicas) < want {
		rep, err := r.createReplica(ctx, s, "")
		if err != nil {
			return err
		}
		s.replicas = append(s.replicas, rep)
	}
	if s.wantsLocalReplica() {
		// The extra replica is there for locality only: pinned to the
		// attached node, as Longhorn does, so it never lands on another
		// node as a surplus that nothing removes.
		rep, err := r.createReplica(ctx, s, s.volume.Spec.NodeID)
		if err != nil {
			return err
		}
		s.replicas = append(s.replicas, rep)
	}
	return nil
}

// wantsLocalReplica reports whether a best-effort volume is attached to a
// node holding none of its replicas while every replica is placed.
func (s *scope) wantsLocalReplica() bool {
	v := s.volume
	if v.Spec.DataLocality != longhornv1.DataLocalityBestEffort || v.Spec.NodeID == "" {
		return false
	}
	if len(s.replicas) < v.Spec.NumberOfReplicas {
		return false
	}
	for _, rep := range s.replicas {
		if rep.Spec.NodeID == v.Spec.NodeID || rep.Spec.NodeID == "" {
			return false
		}
	}
	return true
}

// createReplica creates an unplaced replica of the volume, pinned to
// hardNodeAffinity when it is not "".
func (r *Reconciler) createReplica(ctx context.Context, s *scope, hardNodeAffinity string) (*longhornv1.Replica, error) {
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		return nil, fmt.Errorf("naming a replica: %w", err)
	}
	rep := &longhornv1.Replica{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s-r-%s", s.volume.Name, hex.EncodeToString(suffix)), Namespace: s.volume.Namespace,
			Labels:     map[string]string{LabelVolume: s.volume.Name},
			Finalizers: []string{longhornv1.ReplicaFinalizer},
		},
		Spec: longhornv1.ReplicaSpec{VolumeName: s.volume.Name, VolumeSize: s.size, BackingImage: s.volume.Spec.BackingImage,
			HardNodeAffinity: hardNodeAffinity},
	}
	if err := controllerutil.SetControllerReference(s.volume, rep, r.client.Scheme()); err != nil {
		return nil, fmt.Errorf("owning replica by volume %s: %w", s.volume.Name, err)
	}
	if err := r.client.Create(ctx, rep); err != nil {
		return nil, fmt.Errorf("creating a replica of volume %s: %w", s.volume.Name, err)
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Created replica", "replica", klog.KObj(rep))
	return rep, nil
}

// checkAllocations reads each placed replica's ledger decision: a missing
// request is written again, a rejected one is released and the replica
// unplaced, so it is placed again elsewhere.
func (r *Reconciler) checkAllocations(ctx context.Context, s *scope) error {
	for _, rep := range s.replicas {
		if rep.Spec.DiskID == "" {
			continue
		}
		ds := s.ledgers[rep.Spec.DiskID]
		d, msg := decisionOf(ds, rep.Name, rep.Spec.VolumeSize)
		if s.expanding() {
			d, msg = decisionOf(ds, rep.Name, s.volume.Spec.Size.Value())
			if d == decisionMissing || d == decisionPending {
				d, msg = decisionOf(ds, rep.Name, rep.Spec.VolumeSize)
			}
		}
		switch d {
		case decisionGranted:
			if err := r.setReplicaAllocated(ctx, rep, metav1.ConditionTrue, longhornv1.ReplicaReasonGranted,
				fmt.Sprintf("granted %s on disk %s", bytes(rep.Spec.VolumeSize), rep.Spec.DiskID)); err != nil {
				return err
			}
		case decisionMissing:
			if ds == nil {
				// The disk's ledger is gone: place the replica again.
				if err := r.unplace(ctx, s, rep, "its disk's ledger is gone"); err != nil {
					return err
				}
				continue
			}
			if err := r.request(ctx, s, rep, rep.Spec.DiskID, rep.Spec.VolumeSize); err != nil {
				return err
			}
			s.pending = append(s.pending, rep.Name)
		case decisionPending:
			s.pending = append(s.pending, rep.Name)
		case decisionRejected:
			if s.expanding() && rep.Spec.VolumeSize < s.volume.Spec.Size.Value() && ds.Status.Replicas[rep.Name].ScheduledSize == rep.Spec.VolumeSize {
				continue // an expansion rejection: handled by expand
			}
			s.rejected = append(s.rejected, fmt.Sprintf("%s on %s: %s", rep.Name, rep.Spec.DiskID, msg))
			r.recorder.Eventf(s.volume, rep, corev1.EventTypeWarning, longhornv1.VolumeReasonAllocationRejected, "Allocate",
				"Disk %s rejected replica %s: %s; placing it elsewhere", rep.Spec.DiskID, rep.Name, msg)
			if err := r.unplace(ctx, s, rep, msg); err != nil {
				return err
			}
		}
	}
	return nil
}

// unplace releases rep's ledger request, then clears its placement.
func (r *Reconciler) unplace(ctx context.Context, s *scope, rep *longhornv1.Replica, why string) error {
	key := types.NamespacedName{Namespace: rep.Namespace, Name: rep.Spec.DiskID}
	if _, err := ledgerclient.Mutate(ctx, r.apiReader, r.client, key, ledgerclient.RemoveReplica(rep.Name)); client.IgnoreNotFound(err) != nil {
		return err
	}
	base := rep.DeepCopy()
	rep.Spec.NodeID, rep.Spec.DiskID, rep.Spec.DiskPath, rep.Spec.DataDirectoryName = "", "", "", ""
	if err := r.client.Patch(ctx, rep, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("unplacing replica %s: %w", rep.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Unplaced replica after its ledger rejected it", "replica", klog.KObj(rep), "reason", why)
	return r.setReplicaAllocated(ctx, rep, metav1.ConditionFalse, longhornv1.ReplicaReasonRejected, why)
}

// placeReplicas places every unplaced replica: placement first persisted on
// the Replica, then the request written to the chosen ledger.
func (r *Reconciler) placeReplicas(ctx context.Context, s *scope) error {
	var unplaced, placed []*longhornv1.Replica
	for _, rep := range s.replicas {
		switch {
		case rep.Spec.DiskID != "":
			placed = append(placed, rep)
		case s.lingers(rep.Name):
			// A ledger still shows the request this replica gave up; placing it
			// now could meet that stale decision again. The ledger's next
			// status write brings the volume back.
			s.pending = append(s.pending, rep.Name)
		default:
			unplaced = append(unplaced, rep)
		}
	}
	if len(unplaced) == 0 {
		return nil
	}
	// A placement pins its whole batch to the node its first replica is
	// pinned to: replicas free to go anywhere are placed first, a replica
	// pinned for data locality once none of them is left.
	if free := unpinned(unplaced); len(free) > 0 {
		unplaced = free
	}
	// A reservation the extender made on the attached node is used first.
	if s.usesLocality() && s.volume.Spec.NodeID != "" && !hasReplicaOn(placed, s.volume.Spec.NodeID) {
		if uuid := reservedDisk(s.ledgers, s.volume.Spec.NodeID, s.volume.Name); uuid != "" {
			if err := r.place(ctx, s, unplaced[0], s.choiceFor(uuid)); err != nil {
				return err
			}
			placed, unplaced = append(placed, unplaced[0]), unplaced[1:]
		}
	}
	if len(unplaced) == 0 {
		return nil
	}
	existing := make([]placement.Replica, 0, len(placed))
	for _, rep := range placed {
		existing = append(existing, placement.Replica{NodeID: rep.Spec.NodeID, DiskUUID: rep.Spec.DiskID,
			Healthy: rep.Status.CurrentState == longhornv1.ReplicaStateRunning || rep.Status.CurrentState == longhornv1.ReplicaStatePending || rep.Status.CurrentState == ""})
	}
	result := placement.Place(placement.Request{
		Volume: s.volume, Size: s.size, Count: len(unplaced), Existing: existing,
		HardNodeAffinity: unplaced[0].Spec.HardNodeAffinity,
		Nodes:            placementNodes(s.nodes, s.ledgers, s.volume.Name), Settings: s.sched,
	})
	for i, choice := range result.Choices {
		if err := r.place(ctx, s, unplaced[i], choice); err != nil {
			return err
		}
	}
	if len(result.Choices) < len(unplaced) {
		s.placeFailure = &result
	}
	return nil
}

// unpinned returns the replicas without a hard node affinity.
func unpinned(replicas []*longhornv1.Replica) []*longhornv1.Replica {
	var out []*longhornv1.Replica
	for _, rep := range replicas {
		if rep.Spec.HardNodeAffinity == "" {
			out = append(out, rep)
		}
	}
	return out
}

// lingers reports whether any ledger still holds a request or a decision for replica.
func (s *scope) lingers(replica string) bool {
	for _, ds := range s.ledgers {
		if _, ok := ds.Spec.Replicas[replica]; ok {
			return true
		}
		if _, ok := ds.Status.Replicas[replica]; ok {
			return true
		}
	}
	return false
}

func (s *scope) usesLocality() bool {
	return s.volume.Spec.DataLocality == longhornv1.DataLocalityBestEffort || s.volume.Spec.DataLocality == longhornv1.DataLocalityStrictLocal
}

func hasReplicaOn(replicas []*longhornv1.Replica, node string) bool {
	for _, rep := range replicas {
		if rep.Spec.NodeID == node {
			return true
		}
	}
	return false
}

// choiceFor returns the placement choice of the disk with the given UUID.
func (s *scope) choiceFor(uuid string) placement.Choice {
	ds := s.ledgers[uuid]
	c := placement.Choice{NodeID: ds.Spec.NodeID, DiskName: ds.Spec.Name, DiskUUID: uuid}
	for i := range s.nodes {
		if s.nodes[i].Name == ds.Spec.NodeID {
			c.DiskPath = s.nodes[i].Spec.Disks[ds.Spec.Name].Path
		}
	}
	return c
}

// place persists rep's placement, then writes its request to the ledger.
func (r *Reconciler) place(ctx context.Context, s *scope, rep *longhornv1.Replica, choice placement.Choice) error {
	base := rep.DeepCopy()
	rep.Spec.NodeID, rep.Spec.DiskID, rep.Spec.DiskPath = choice.NodeID, choice.DiskUUID, choice.DiskPath
	rep.Spec.DataDirectoryName = rep.Name
	rep.Spec.VolumeSize = s.size
	if err := r.client.Patch(ctx, rep, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("placing replica %s on disk %s: %w", rep.Name, choice.DiskUUID, err)
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Placed replica", "replica", klog.KObj(rep), "node", choice.NodeID, "disk", choice.DiskName)
	s.pending = append(s.pending, rep.Name)
	if err := r.requestBackingImageCopy(ctx, s, choice.DiskUUID); err != nil {
		return err
	}
	return r.request(ctx, s, rep, choice.DiskUUID, s.size)
}

// requestBackingImageCopy asks for a copy of the volume's backing image on
// the replica's disk by adding the disk to the image's diskFileSpecMap; the
// backing-image controller requests the copy's space from the same ledger.
func (r *Reconciler) requestBackingImageCopy(ctx context.Context, s *scope, diskUUID string) error {
	name := s.volume.Spec.BackingImage
	if name == "" {
		return nil
	}
	key := types.NamespacedName{Namespace: s.volume.Namespace, Name: name}
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		bi := &longhornv1.BackingImage{}
		if err := r.apiReader.Get(ctx, key, bi); err != nil {
			return err
		}
		if _, ok := bi.Spec.DiskFileSpecMap[diskUUID]; ok {
			return nil
		}
		if bi.Spec.DiskFileSpecMap == nil {
			bi.Spec.DiskFileSpecMap = map[string]longhornv1.BackingImageDiskFileSpec{}
		}
		bi.Spec.DiskFileSpecMap[diskUUID] = longhornv1.BackingImageDiskFileSpec{}
		return r.client.Update(ctx, bi)
	})
	if apierrors.IsNotFound(err) {
		r.recorder.Eventf(s.volume, nil, corev1.EventTypeWarning, "BackingImageNotFound", "Place",
			"Backing image %s does not exist; the replica on disk %s has no copy to start from", name, diskUUID)
		return nil
	}
	if err != nil {
		return fmt.Errorf("asking for a copy of backing image %s on disk %s: %w", name, diskUUID, err)
	}
	return nil
}

// request writes rep's request of size bytes to the ledger of disk uuid,
// handing over a reservation held there for the volume (ledger rule 5).
func (r *Reconciler) request(ctx context.Context, s *scope, rep *longhornv1.Replica, uuid string, size int64) error {
	key := types.NamespacedName{Namespace: rep.Namespace, Name: uuid}
	volume := s.volume.Name
	_, err := ledgerclient.Mutate(ctx, r.apiReader, r.client, key, func(ds *longhornv1.DiskSchedule) bool {
		changed := ledgerclient.SetReplica(rep.Name, size)(ds)
		if res, ok := ds.Spec.Reservations[volume]; ok && res.Replica == "" {
			res.Replica = rep.Name
			ds.Spec.Reservations[volume] = res
			changed = true
		}
		return changed
	})
	if apierrors.IsNotFound(err) {
		return nil // the ledger is gone; checkAllocations unplaces the replica next time
	}
	return err
}

// expanding reports whether spec.size asks for more than the size in effect.
func (s *scope) expanding() bool {
	return s.volume.Status.CurrentSize.Value() > 0 && s.volume.Spec.Size.Value() > s.volume.Status.CurrentSize.Value()
}

// expand raises every replica's request to spec.size, and once every ledger
// granted it, makes the new size take effect. A rejection anywhere releases
// the growth already granted and keeps the old size.
func (r *Reconciler) expand(ctx context.Context, s *scope) error {
	if !s.expanding() || s.placeFailure != nil || len(s.rejected) > 0 {
		return nil
	}
	target := s.volume.Spec.Size.Value()
	if failed := meta.FindStatusCondition(s.volume.Status.Conditions, longhornv1.VolumeConditionExpanding); failed != nil &&
		failed.Reason == longhornv1.VolumeReasonExpansionFailed && failed.ObservedGeneration == s.volume.Generation {
		return nil // this target was refused; a new spec.size tries again
	}
	granted, rejected := 0, []string{}
	for _, rep := range s.replicas {
		if rep.Spec.DiskID == "" {
			return nil // expand only a fully placed volume
		}
		ds := s.ledgers[rep.Spec.DiskID]
		d, msg := decisionOf(ds, rep.Name, target)
		switch d {
		case decisionGranted:
			granted++
		case decisionRejected:
			rejected = append(rejected, fmt.Sprintf("replica %s on disk %s: %s", rep.Name, rep.Spec.DiskID, msg))
		case decisionMissing, decisionPending:
			if err := r.request(ctx, s, rep, rep.Spec.DiskID, target); err != nil {
				return err
			}
		}
	}
	switch {
	case len(rejected) > 0:
		// Release the growth: every request back to the size in effect.
		for _, rep := range s.replicas {
			if err := r.request(ctx, s, rep, rep.Spec.DiskID, s.size); err != nil {
				return err
			}
		}
		msg := fmt.Sprintf("expansion from %s to %s refused: %s", bytes(s.size), bytes(target), strings.Join(rejected, "; "))
		r.recorder.Eventf(s.volume, nil, corev1.EventTypeWarning, longhornv1.VolumeReasonExpansionFailed, "Expand", "%s", msg)
		s.setCondition(longhornv1.VolumeConditionExpanding, metav1.ConditionFalse, longhornv1.VolumeReasonExpansionFailed, msg)
	case granted == len(s.replicas):
		for _, rep := range s.replicas {
			base := rep.DeepCopy()
			rep.Spec.VolumeSize = target
			if err := r.client.Patch(ctx, rep, client.MergeFrom(base)); err != nil {
				return fmt.Errorf("resizing replica %s: %w", rep.Name, err)
			}
		}
		s.size = target
		s.setCondition(longhornv1.VolumeConditionExpanding, metav1.ConditionFalse, longhornv1.VolumeReasonExpansionComplete,
			fmt.Sprintf("expanded to %s", bytes(target)))
	default:
		s.setCondition(longhornv1.VolumeConditionExpanding, metav1.ConditionTrue, longhornv1.VolumeReasonExpansionPending,
			fmt.Sprintf("waiting for %d of %d ledgers to grant %s", len(s.replicas)-granted, len(s.replicas), bytes(target)))
		s.pending = append(s.pending, "expansion")
	}
	return nil
}

// removeSurplus deletes a remote replica of a best-effort volume once its
// local replica runs and the volume has more replicas than it asks for.
func (r *Reconciler) removeSurplus(ctx context.Context, s *scope) error {
	v := s.volume
	if v.Spec.DataLocality != longhornv1.DataLocalityBestEffort || v.Spec.NodeID == "" || len(s.replicas) <= v.Spec.NumberOfReplicas {
		return nil
	}
	localRunning := false
	for _, rep := range s.replicas {
		if rep.Spec.NodeID == v.Spec.NodeID && rep.Status.CurrentState == longhornv1.ReplicaStateRunning {
			localRunning = true
		}
	}
	if !localRunning {
		return nil
	}
	for _, rep := range s.replicas {
		if rep.Spec.NodeID != v.Spec.NodeID {
			if err := r.client.Delete(ctx, rep); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("removing surplus replica %s: %w", rep.Name, err)
			}
			ctrl.LoggerFrom(ctx).Info("Removed a surplus remote replica after the local one started", "replica", klog.KObj(rep))
			return nil
		}
	}
	return nil
}

func (r *Reconciler) setReplicaAllocated(ctx context.Context, rep *longhornv1.Replica, status metav1.ConditionStatus, reason, msg string) error {
	base := rep.DeepCopy()
	if rep.Status.CurrentState == "" {
		rep.Status.CurrentState = longhornv1.ReplicaStatePending
	}
	changed := meta.SetStatusCondition(&rep.Status.Conditions, metav1.Condition{
		Type: longhornv1.ReplicaConditionDiskAllocated, Status: status, Reason: reason, Message: msg, ObservedGeneration: rep.Generation,
	})
	if !changed && base.Status.CurrentState == rep.Status.CurrentState {
		return nil
	}
	if err := r.client.Status().Patch(ctx, rep, client.MergeFrom(base)); err != nil {
		return client.IgnoreNotFound(err)
	}
	return nil
}

func (s *scope) setCondition(typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&s.volume.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: s.volume.Generation,
	})
}

// writeStatus sets Scheduled, DiskAllocation and currentSize, and emits an
// Event when the volume becomes unschedulable.
func (r *Reconciler) writeStatus(ctx context.Context, s *scope) error {
	base := s.volume.DeepCopy()
	wasScheduled := meta.FindStatusCondition(base.Status.Conditions, longhornv1.VolumeConditionScheduled)
	switch {
	case s.placeFailure != nil && s.placeFailure.Reason == placement.ReasonWaitingForAttachment:
		s.setCondition(longhornv1.VolumeConditionScheduled, metav1.ConditionFalse, longhornv1.VolumeReasonWaitingForAttachment,
			fmt.Sprintf("replicas of a %s volume are placed once it is attached", s.volume.Spec.DataLocality))
	case s.placeFailure != nil:
		s.setCondition(longhornv1.VolumeConditionScheduled, metav1.ConditionFalse, longhornv1.VolumeReasonReplicaSchedulingFailure, s.placeFailure.Message)
		if wasScheduled == nil || wasScheduled.Status != metav1.ConditionFalse || wasScheduled.Message != s.placeFailure.Message {
			r.recorder.Eventf(s.volume, nil, corev1.EventTypeWarning, longhornv1.VolumeReasonReplicaSchedulingFailure, "Schedule", "%s", s.placeFailure.Message)
		}
	case len(s.pending) > 0 || len(s.rejected) > 0:
		// Placed, but not every ledger has granted the space yet: Scheduled
		// becomes True only once it has, so it never flips back.
		if wasScheduled == nil || wasScheduled.Status != metav1.ConditionTrue {
			s.setCondition(longhornv1.VolumeConditionScheduled, metav1.ConditionUnknown, longhornv1.VolumeReasonAllocationPending,
				"replicas are placed; waiting for their disks' ledgers to grant the space")
		}
	default:
		s.setCondition(longhornv1.VolumeConditionScheduled, metav1.ConditionTrue, longhornv1.VolumeReasonReplicasScheduled,
			fmt.Sprintf("%d replicas placed and granted", len(s.replicas)))
	}
	switch {
	case len(s.rejected) > 0:
		s.setCondition(longhornv1.VolumeConditionDiskAllocation, metav1.ConditionFalse, longhornv1.VolumeReasonAllocationRejected, strings.Join(s.rejected, "; "))
	case len(s.pending) > 0 || s.placeFailure != nil:
		s.setCondition(longhornv1.VolumeConditionDiskAllocation, metav1.ConditionFalse, longhornv1.VolumeReasonAllocationPending,
			fmt.Sprintf("waiting for the ledgers to decide: %s", strings.Join(s.pendingNames(), ", ")))
	default:
		s.setCondition(longhornv1.VolumeConditionDiskAllocation, metav1.ConditionTrue, longhornv1.VolumeReasonAllocated,
			fmt.Sprintf("every replica is granted %s", bytes(s.size)))
	}
	if s.volume.Status.CurrentSize.IsZero() || s.volume.Status.CurrentSize.Value() != s.size {
		s.volume.Status.CurrentSize = *resource.NewQuantity(s.size, resource.BinarySI)
	}
	s.volume.Status.CurrentNodeID = s.volume.Spec.NodeID
	if err := r.client.Status().Patch(ctx, s.volume, client.MergeFrom(base)); err != nil {
		return client.IgnoreNotFound(err)
	}
	return nil
}

func (s *scope) pendingNames() []string {
	names := append([]string(nil), s.pending...)
	for _, rep := range s.replicas {
		if rep.Spec.DiskID == "" {
			names = append(names, rep.Name+" (unplaced)")
		}
	}
	return names
}

func bytes(n int64) string { return resource.NewQuantity(n, resource.BinarySI).String() }

// SetupWithManager registers the controller. A volume is reconciled on
// changes of itself and its replicas; volumes not yet fully allocated also
// on ledger, node and setting changes, since freed space or a new setting
// may let them schedule.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&longhornv1.Volume{}).
		Owns(&longhornv1.Replica{}).
		Watches(&longhornv1.DiskSchedule{}, handler.EnqueueRequestsFromMapFunc(r.unsettledVolumes)).
		Watches(&longhornv1.Node{}, handler.EnqueueRequestsFromMapFunc(r.unsettledVolumes)).
		Watches(&longhornv1.Setting{}, handler.EnqueueRequestsFromMapFunc(r.unsettledVolumes)).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.workers}).
		Named("volume").
		Complete(r)
}

// unsettledVolumes returns the volumes in obj's namespace that are not both
// Scheduled and allocated.
func (r *Reconciler) unsettledVolumes(ctx context.Context, obj client.Object) []reconcile.Request {
	list := &longhornv1.VolumeList{}
	if err := r.client.List(ctx, list, client.InNamespace(obj.GetNamespace())); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing volumes to reconcile")
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		v := &list.Items[i]
		if meta.IsStatusConditionTrue(v.Status.Conditions, longhornv1.VolumeConditionScheduled) &&
			meta.IsStatusConditionTrue(v.Status.Conditions, longhornv1.VolumeConditionDiskAllocation) &&
			!(v.Status.CurrentSize.Value() > 0 && v.Spec.Size.Value() > v.Status.CurrentSize.Value()) {
			continue
		}
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(v)})
	}
	return reqs
}
