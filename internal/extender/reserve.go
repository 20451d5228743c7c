package extender

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/index"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/ledgerclient"
)

// writeWorkers write reservations to distinct disks in parallel.
const writeWorkers = 4

// writeQueue holds the disk UUIDs whose reservations are to be written.
type writeQueue = workqueue.TypedRateLimitingInterface[string]

// errRefused says a ledger has no room left for a reservation.
var errRefused = errors.New("reservation refused")

// queueWrites queues the disks of entry's pending volumes. Called with e.mu held.
func (e *Extender) queueWrites(entry *inflight) {
	if e.writes == nil {
		return
	}
	for _, disk := range entry.pending {
		e.writes.Add(disk)
	}
}

// runWriters writes the reservations of the disks in queue until it shuts down.
func (e *Extender) runWriters(ctx context.Context, queue writeQueue) {
	for range writeWorkers {
		go func() {
			for {
				disk, shutdown := queue.Get()
				if shutdown {
					return
				}
				if err := e.writeDisk(ctx, disk, ""); err != nil && ctx.Err() == nil {
					ctrl.LoggerFrom(ctx).Error(err, "Writing reservations", "diskSchedule", disk)
					queue.AddRateLimited(disk)
				} else {
					queue.Forget(disk)
				}
				queue.Done(disk)
			}
		}()
	}
}

// want is one reservation an entry waits for on a disk.
type want struct {
	entry *inflight
	// pod is the entry's pod as reservations name it (inflight.key).
	pod    string
	volume string
	size   int64
}

// wanted returns the reservations entries whose node is known wait for on
// disk, in a stable order, with the ledger as the view holds it. The
// entries of pods being bound through /bind are left to their Bind, except
// binding's own. Called with e.mu held.
func (e *Extender) wanted(disk string, binding types.UID) ([]want, *dsv1.DiskSchedule) {
	var out []want
	for _, entry := range e.overlay.entries() {
		if entry.node == "" || entry.known == knownByNomination || (entry.known == knownByBind && entry.uid != binding) {
			continue
		}
		for volume, d := range entry.pending {
			if d == disk {
				out = append(out, want{entry: entry, pod: entry.key(), volume: volume, size: entry.sizes[volume]})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].volume < out[j].volume })
	return out, e.view.ledger(disk)
}

// writeDisk writes, in one merge patch, the reservations the entries in
// flight wait for on disk, and drops from its spec the reservations the
// ledger is done with, as planReservations plans them. A reservation the
// ledger has no room for is not written: its entry's claim ends and, when
// onlyPod (a pod's UID) is set and the reservation is that pod's,
// errRefused is returned. A volume whose replica Longhorn already placed
// on the node needs no reservation.
func (e *Extender) writeDisk(ctx context.Context, disk string, onlyPod types.UID) error {
	e.mu.Lock()
	wants, ds := e.wanted(disk, onlyPod)
	e.mu.Unlock()
	if len(wants) == 0 {
		return nil
	}
	if ds == nil {
		return fmt.Errorf("no DiskSchedule for disk %s yet", disk)
	}
	placed, err := e.placedOnNode(ctx, wants, ds.Spec.NodeID)
	if err != nil {
		return err
	}
	plan := planReservations(wants, ds, placed)
	// Only the extender writes reservations, whole keys at a time: a merge
	// patch without the resourceVersion lock never conflicts with the other
	// writers or the controller (ledgerclient.Merge). The informer's event
	// of the write settles the entries it shows.
	if _, err := ledgerclient.Merge(ctx, e.opts.Client, ds, plan.apply); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, i := range plan.wrote {
		w := wants[i]
		if e.written[disk] == nil {
			e.written[disk] = map[string]string{}
		}
		e.written[disk][w.volume] = w.pod
	}
	for _, w := range wants {
		if r, ok := placed[w.volume]; ok {
			w.entry.replicas[w.volume] = r
		}
	}
	for _, w := range wants {
		e.settleShown(w.entry)
	}
	var mine []string
	for _, i := range plan.refused {
		w := wants[i]
		if !w.entry.refused[w.volume] {
			e.opts.Metrics.Reservations.WithLabelValues("refused").Inc()
		}
		if w.entry.uid != onlyPod && keepsClaim(w.entry) {
			// Its pod is on the node for good: the claim stays counted, so
			// no other pod is let onto the space this one waits for, and
			// the reservation is written once the ledger shows room (the
			// ledger's next change queues the disk again).
			w.entry.refused = markVolume(w.entry.refused, w.volume)
			continue
		}
		e.settle(w.entry, w.volume, false)
		if w.entry.uid == onlyPod {
			mine = append(mine, fmt.Sprintf("volume %s needs %s", w.volume, ledger.Bytes(w.size)))
		}
	}
	if len(mine) > 0 {
		return fmt.Errorf("%w: %s on disk %s of node %s, which has %s free", errRefused, strings.Join(mine, ", "),
			ds.Spec.Name, ds.Spec.NodeID, ledger.Bytes(ledger.Free(ds)))
	}
	return nil
}

// keepsClaim reports whether entry's claims outlive a refusal: its pod is
// bound to its node, or kube-scheduler's volume binding chose the node for
// its claims, so its volumes need that node's space whatever the ledger
// granted meanwhile (Longhorn may have placed another volume's replica
// there between the pod's filter and its reservation).
func keepsClaim(entry *inflight) bool {
	switch entry.known {
	case knownByBinding, knownBySelectedNode, knownByRebuild, knownByRewrite:
		return true
	}
	return false
}

// markVolume adds volume to set, allocating it when nil.
func markVolume(set map[string]bool, volume string) map[string]bool {
	if set == nil {
		set = map[string]bool{}
	}
	set[volume] = true
	return set
}

// placedOnNode returns the volumes of wants that already have a replica on
// node, as the cache shows Longhorn's Replicas, with that replica: its
// request, not a reservation, holds their space.
func (e *Extender) placedOnNode(ctx context.Context, wants []want, node string) (map[string]placedReplica, error) {
	out := map[string]placedReplica{}
	for _, w := range wants {
		replicas := &lhv1.ReplicaList{}
		if err := e.opts.Client.List(ctx, replicas, client.InNamespace(e.opts.Namespace),
			client.MatchingFields{index.ReplicaByVolume: w.volume}, client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("listing the replicas of volume %s: %w", w.volume, err)
		}
		for i := range replicas.Items {
			if r := &replicas.Items[i]; r.Spec.NodeID == node && r.Spec.DiskID != "" && r.DeletionTimestamp.IsZero() {
				out[w.volume] = placedReplica{name: r.Name, disk: r.Spec.DiskID}
			}
		}
	}
	return out, nil
}

// adoptLater tracks, in the background, entry's pod on node, where the
// filter did not offer it. Called with e.mu held.
func (e *Extender) adoptLater(entry *inflight, node, how string) {
	go func() {
		if err := e.adopt(e.background, entry.pod, entry.uid, node, how); err != nil {
			ctrl.LoggerFrom(e.background).Error(err, "Tracking a pod on its node", "pod", entry.pod, "node", node)
		}
	}()
}

// adopt tracks the pod on node, which kube-scheduler chose without this
// extender's answer being known (another cycle's, or another leader's): its
// volumes that need new space there are packed onto the node's disks and
// reserved like those of a filtered pod.
func (e *Extender) adopt(ctx context.Context, key types.NamespacedName, uid types.UID, node, how string) error {
	pod := &corev1.Pod{}
	if err := e.opts.Client.Get(ctx, key, pod); err != nil {
		return client.IgnoreNotFound(err)
	}
	if pod.UID != uid {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.adoptLocked(ctx, pod, node, how)
}

// adoptLocked is adopt with e.mu held, for pod as the cache holds it.
func (e *Extender) adoptLocked(ctx context.Context, pod *corev1.Pod, node, how string) error {
	if cur := e.overlay.get(pod.UID); cur != nil && cur.node != "" {
		return nil
	}
	vols, err := e.resolver.localVolumes(ctx, pod)
	if err != nil || len(vols) == 0 {
		return err
	}
	sched, err := e.settings.get(ctx)
	if err != nil {
		return err
	}
	e.overlay.drop(pod.UID)
	// The pod is on node already: its local space is reserved whatever room
	// Longhorn finds for the other replicas.
	fits := e.evaluateAll(pod, vols, []string{node}, sched, withOverlay)
	f := fits[node]
	if !f.OK {
		return fmt.Errorf("its volumes do not fit on node %s: %s", node, f.Reason)
	}
	if len(f.Assignment) == 0 {
		return nil
	}
	entry := &inflight{pod: types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, uid: pod.UID,
		claims: claimNames(pod), offered: map[string]fit{node: f}, filtered: e.opts.Clock.Now()}
	e.overlay.add(entry)
	e.learn(entry, node, how)
	return nil
}
