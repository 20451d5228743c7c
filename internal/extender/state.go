package extender

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/metrics"
)

// flight is the extender's in-flight state, with its own lock: the view of
// nodes and ledgers the filter reads, the pods in flight (the overlay), the
// reservations written and not yet seen decided, and the pods whose entries
// lapsed. It is a bookkeeper: it decides nothing and reads nothing of the
// cluster but the informers' objects it is given. The Extender takes a
// snapshot of the view and the overlay (snapshot), evaluates it without
// the lock (evaluate), and records a pod let through (track, adopt) only if
// the pods in flight claim no more since on the disks it was packed onto,
// else evaluates again: two pods never get the same bytes, and filters of
// different pods evaluate at once. The view is under the same lock as the
// overlay so that a ledger change and the entries it settles are seen
// together: an entry drops only once the view shows what replaces it. Its
// methods that take the lock are the only way in; the others say they are
// called with it held.
type flight struct {
	clock   clock.PassiveClock
	metrics *metrics.Extender

	mu sync.Mutex
	// view is the current view; viewShared is set once a snapshot holds
	// it, and the next event then edits a copy.
	view       *view
	viewShared bool
	overlay    *overlay
	// written are reservations written and not yet seen decided, by disk
	// UUID then volume, for the metrics.
	written map[string]map[string]string
	// lapsed are the pods whose entries expired before their node was
	// known, by UID, with when: bound later, they are tracked again.
	lapsed map[types.UID]time.Time
	// writes is the queue of disk UUIDs whose reservations are to be
	// written; nil while the extender is not running.
	writes writeQueue
	// background carries the logger of the running extender.
	background context.Context
}

// adoption is a pod to track afresh on a node the filter did not offer it
// (Extender.adoptLater): it is given back to the caller, which reads the
// pod and evaluates the node without the lock.
type adoption struct {
	pod       types.NamespacedName
	uid       types.UID
	node, how string
}

// newFlight returns an empty in-flight state.
func newFlight(clk clock.PassiveClock, m *metrics.Extender) *flight {
	return &flight{clock: clk, metrics: m, view: newView(), overlay: newOverlay(),
		written: map[string]map[string]string{}, lapsed: map[types.UID]time.Time{}, background: context.Background()}
}

// run makes writes the queue of the disks to write and ctx the context of
// the background work, until stop.
func (f *flight) run(ctx context.Context, writes writeQueue) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.background, f.writes = ctx, writes
}

// stop ends the queueing of writes.
func (f *flight) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes = nil
}

// --- Snapshots for the evaluator, and the pods it lets through.

// snapshot returns the view and the overlay as they are now, for an
// evaluation without the lock. A pod's new scheduling cycle (drop, its UID)
// first ends the pod's own entry, which its evaluation must not count.
func (f *flight) snapshot(drop types.UID) *snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	if drop != "" {
		f.overlay.drop(drop)
	}
	return f.snapshotLocked()
}

// snapshotLocked is snapshot with f.mu held.
func (f *flight) snapshotLocked() *snapshot {
	f.viewShared = true
	return &snapshot{view: f.view, claimed: f.overlay.claims(), inFlight: f.overlay.len(),
		added: f.overlay.added, changed: f.overlay.changed}
}

// editView returns the view for an event to edit: a copy when a snapshot
// holds the current one. Called with f.mu held.
func (f *flight) editView() *view {
	if f.viewShared {
		f.view, f.viewShared = f.view.clone(), false
	}
	return f.view
}

// track records pod in flight on the nodes where fits, evaluated on s with
// the overlay, let it through and it needs new space. It records nothing,
// and returns false, when fits no longer hold (the pods in flight claim
// more than in s on a disk fits packed the pod onto): the caller evaluates
// again.
func (f *flight) track(s *snapshot, pod *corev1.Pod, fits map[string]fit) bool {
	offered := needingSpace(fits)
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.overlay.within(s.added, s.claimed, fits) {
		return false
	}
	if len(offered) == 0 {
		return true
	}
	f.overlay.add(&inflight{
		pod:      types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name},
		uid:      pod.UID,
		claims:   claimNames(pod),
		offered:  offered,
		filtered: f.clock.Now(),
	})
	f.metrics.InFlight.Set(float64(f.overlay.len()))
	return true
}

// needingSpace returns the verdicts of fits that let the pod through with
// new space: fits itself when all do (nothing changes a verdict map).
func needingSpace(fits map[string]fit) map[string]fit {
	n := 0
	for _, ft := range fits {
		if ft.OK && len(ft.Assignment) > 0 {
			n++
		}
	}
	if n == len(fits) {
		return fits
	}
	out := make(map[string]fit, n)
	for node, ft := range fits {
		if ft.OK && len(ft.Assignment) > 0 {
			out[node] = ft
		}
	}
	return out
}

// forget drops the pod with uid from the overlay.
func (f *flight) forget(uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.overlay.drop(uid)
}

// --- The informers' events.

// nodeEvent records Longhorn's node n, or forgets it when gone.
func (f *flight) nodeEvent(n *lhv1.Node, gone bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if gone {
		f.editView().deleteNode(n.Name)
		return
	}
	f.editView().setNode(n)
}

// ledgerEvent records ds in the view, or forgets it when gone, and
// settles what the change shows. waiting are, by volume, the pods bound to
// ds's node whose reservations ds shows expired and which still need them
// (Extender.waitingPods, read before the lock): they are held in flight
// again (holdExpired).
func (f *flight) ledgerEvent(ds *dsv1.DiskSchedule, gone bool, waiting map[string]*corev1.Pod) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if gone {
		f.editView().deleteLedger(ds.Name)
		return
	}
	f.editView().setLedger(ds)
	f.ledgerChanged(ds, waiting)
}

// ledgerChanged settles the overlay entries that ds now shows, counts the
// decisions on reservations the extender wrote, holds again the expired
// reservations of waiting, and queues the disk again while an entry still
// waits for a write there. Called with f.mu held.
func (f *flight) ledgerChanged(ds *dsv1.DiskSchedule, waiting map[string]*corev1.Pod) {
	for volume, pod := range f.written[ds.Name] {
		res, state, ok := ledger.ReservationOf(ds, volume)
		switch {
		case !ok || res.Pod != pod:
			delete(f.written[ds.Name], volume)
		case state != "":
			f.metrics.Reservations.WithLabelValues(string(state)).Inc()
			delete(f.written[ds.Name], volume)
		}
	}
	for volume, pod := range waiting {
		f.holdExpired(ds, volume, pod)
	}
	unwritten := false
	for _, entry := range f.overlay.onNode(ds.Spec.NodeID) {
		if entry.known == knownByNomination {
			continue
		}
		f.settleShown(entry)
		for volume, disk := range entry.pending {
			_, placed := entry.replicas[volume]
			unwritten = unwritten || (disk == ds.Name && !placed)
		}
	}
	if unwritten && f.writes != nil {
		f.writes.Add(ds.Name)
	}
}

// settleShown settles each volume of entry that the ledgers show as held
// for the pod: its reservation on its disk, or the request of the replica
// Longhorn placed on the node. Called with f.mu held.
func (f *flight) settleShown(entry *inflight) {
	for volume, disk := range entry.pending {
		if r, ok := entry.replicas[volume]; ok {
			if ds := f.view.ledger(r.disk); ds != nil {
				if _, requested := ds.Spec.Replicas[r.name]; requested {
					f.settle(entry, volume, true)
					continue
				}
			}
		}
		ds := f.view.ledger(disk)
		if ds == nil {
			continue
		}
		res, state, ok := ledger.ReservationOf(ds, volume)
		if !ok || res.Pod != entry.key() || res.Size != entry.sizes[volume] || state == dsv1.ReservationStateExpired {
			continue // not there, or an old one the writer replaces
		}
		if state == dsv1.ReservationStateRejected && keepsClaim(entry) {
			// Requested again once the ledger shows room: the writer drops
			// the rejected one first (planReservations).
			entry.refused = markVolume(entry.refused, volume)
			continue
		}
		f.settle(entry, volume, state != dsv1.ReservationStateRejected)
	}
}

// settle ends volume's claim in entry: held tells whether the ledger holds
// its space. Called with f.mu held.
func (f *flight) settle(entry *inflight, volume string, held bool) {
	if f.overlay.settle(entry, volume) {
		f.metrics.NodeReservation.WithLabelValues(fmt.Sprint(held)).Observe(f.clock.Since(entry.narrowed).Seconds())
	}
	f.metrics.InFlight.Set(float64(f.overlay.len()))
}

// podEvent follows a pod in flight: its node once bound or nominated, its
// end when deleted. It returns the pods to track afresh on a node the
// filter did not offer them, and whether pod was bound after its entry
// lapsed (kube-scheduler's binding took longer than
// scheduler-extender-pod-scheduling-timeout): the caller then packs its
// volumes onto its node's disks and tracks it there (Extender.podEvent)
// before it handles the informer's next event; until then a filter sees
// its space free, as it has since the entry lapsed.
func (f *flight) podEvent(pod *corev1.Pod, gone bool) (later []adoption, lapsed bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	entry := f.overlay.get(pod.UID)
	if entry == nil {
		if _, ok := f.lapsed[pod.UID]; !ok || (pod.Spec.NodeName == "" && !gone && pod.DeletionTimestamp == nil) {
			return nil, false
		}
		delete(f.lapsed, pod.UID) // bound or gone
		return nil, !gone && pod.DeletionTimestamp == nil
	}
	switch {
	case gone || pod.DeletionTimestamp != nil:
		f.expire(entry, "deleted")
	case pod.Spec.NodeName != "":
		later = f.learn(entry, pod.Spec.NodeName, knownByBinding)
	case entry.node != "":
	case pod.Status.NominatedNodeName != "":
		later = f.learn(entry, pod.Status.NominatedNodeName, knownByNomination)
	}
	// A PodScheduled=False condition is no sign that the cycle the filter
	// answered failed: kube-scheduler writes a failed cycle's condition
	// asynchronously, so it can arrive after the filter of the pod's next
	// cycle, which may be binding the pod. A failed cycle's entry ends with
	// the pod's next filter or the pod-scheduling timeout.
	return later, false
}

// claimEvent learns the node of the pods in flight that use pvc once
// kube-scheduler's volume binding selected a node for it. It returns the
// pods to track afresh on a node the filter did not offer them.
func (f *flight) claimEvent(pvc *corev1.PersistentVolumeClaim) (later []adoption) {
	node := pvc.Annotations[annSelectedNode]
	if node == "" {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, entry := range f.overlay.entries() {
		if entry.pod.Namespace == pvc.Namespace && slices.Contains(entry.claims, pvc.Name) {
			later = append(later, f.learn(entry, node, knownBySelectedNode)...)
		}
	}
	return later
}

// learn narrows entry to node and, unless node is only nominated, queues
// the writes of its reservations. An entry that did not offer node, or was
// narrowed to another node by a nomination, is dropped, and returned for
// its pod to be adopted on node afresh. The binding of a pod whose Bind
// wrote its reservations ends that Bind's hold on them: what it could not
// write yet (the ledger still showing its decision on an earlier
// reservation of the volume) is the writer's from then on. Called with
// f.mu held.
func (f *flight) learn(entry *inflight, node, how string) []adoption {
	if entry.node != "" && (entry.node == node || how == knownByNomination) {
		if (entry.known == knownByNomination && how != knownByNomination) || (entry.known == knownByBind && how == knownByBinding) {
			entry.known = how
			f.queueWrites(entry)
		}
		return nil
	}
	afresh := []adoption{{pod: entry.pod, uid: entry.uid, node: node, how: how}}
	if entry.node != "" {
		f.overlay.drop(entry.uid)
		return afresh
	}
	f.metrics.PodSchedulingWait.WithLabelValues("true").Observe(f.clock.Since(entry.filtered).Seconds())
	if !f.overlay.narrow(entry, node, how, f.clock.Now()) {
		return afresh
	}
	if how != knownByNomination {
		f.settleShown(entry)
	}
	if how != knownByNomination && how != knownByBind {
		f.queueWrites(entry) // Bind writes its pod's reservations itself
	}
	f.metrics.InFlight.Set(float64(f.overlay.len()))
	return nil
}

// expirePod drops the entry of the pod with uid, if any, whose pod will
// not use the space it was offered.
func (f *flight) expirePod(uid types.UID, reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if entry := f.overlay.get(uid); entry != nil {
		f.expire(entry, reason)
	}
}

// expire drops entry, whose pod will not use the space it was offered.
// Called with f.mu held.
func (f *flight) expire(entry *inflight, reason string) {
	if f.overlay.drop(entry.uid) == nil {
		return
	}
	if entry.node == "" {
		f.metrics.PodSchedulingWait.WithLabelValues("false").Observe(f.clock.Since(entry.filtered).Seconds())
		if reason == "no-node" {
			f.lapsed[entry.uid] = f.clock.Now()
		}
	}
	f.metrics.Expired.WithLabelValues(reason).Inc()
	f.metrics.InFlight.Set(float64(f.overlay.len()))
	ctrl.LoggerFrom(f.background).V(1).Info("A pod in flight no longer holds space", "pod", entry.pod, "node", entry.node, "reason", reason)
}

// sweep expires the entries whose pods got no node within podScheduling
// (scheduler-extender-pod-scheduling-timeout) and those whose reservations
// the ledgers did not show within waitWindow of the node being known, and
// forgets the lapsed pods older than waitWindow.
func (f *flight) sweep(podScheduling time.Duration) {
	now := f.clock.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	for uid, at := range f.lapsed {
		if now.Sub(at) > waitWindow {
			delete(f.lapsed, uid)
		}
	}
	for _, entry := range f.overlay.byUID { // in any order; expire deletes the entries it ends
		switch {
		case entry.node == "" && now.Sub(entry.filtered) > podScheduling:
			f.expire(entry, "no-node")
		case entry.known == knownByNomination && now.Sub(entry.narrowed) > podScheduling:
			f.expire(entry, "no-node")
		case entry.node != "" && now.Sub(entry.narrowed) > waitWindow:
			// A pod on its node keeps its space counted until the
			// ledgers show it, however long the writes take.
			f.expire(entry, "no-reservation")
		}
	}
}

// holdExpired keeps counting, in the overlay, the space of volume's
// reservation on ds that expired while pod, bound to ds's node, still
// waits for Longhorn to place its volume's replica there, and queues it to
// be written again. The ledger holds the reservation of a bound pod
// (DESIGN rule 6), so this happens only when the pod bound after the
// decision that expired it. It runs under the same lock as the view's
// update that shows the expiry, so no filter sees the space free in
// between, or under the binding's event when the pod bound after the ledger
// showed it (holdAgain). Called with f.mu held.
func (f *flight) holdExpired(ds *dsv1.DiskSchedule, volume string, pod *corev1.Pod) {
	res, state, ok := ledger.ReservationOf(ds, volume)
	if f.writes == nil || !ok || state != dsv1.ReservationStateExpired || res.Pod != pod.Namespace+"/"+pod.Name {
		return
	}
	if entry := f.overlay.get(pod.UID); entry != nil {
		return // followed already
	}
	node := ds.Spec.NodeID
	entry := &inflight{
		pod: client.ObjectKeyFromObject(pod), uid: pod.UID, claims: claimNames(pod), filtered: f.clock.Now(),
		offered: map[string]fit{node: {OK: true, Assignment: map[string]string{volume: ds.Name}, Sizes: map[string]int64{volume: res.Size}}},
	}
	f.overlay.add(entry)
	f.overlay.narrow(entry, node, knownByRewrite, f.clock.Now())
	f.queueWrites(entry)
	f.metrics.InFlight.Set(float64(f.overlay.len()))
}

// expiredFor returns the ledgers of pod's node that show a reservation
// made for pod expired, unless pod is in flight.
func (f *flight) expiredFor(pod *corev1.Pod) []*dsv1.DiskSchedule {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.overlay.get(pod.UID) != nil {
		return nil
	}
	key := pod.Namespace + "/" + pod.Name
	var out []*dsv1.DiskSchedule
	for _, ds := range f.view.ledgersOf(pod.Spec.NodeName) {
		for volume := range ds.Spec.Reservations {
			if res, state, _ := ledger.ReservationOf(ds, volume); state == dsv1.ReservationStateExpired && res.Pod == key {
				out = append(out, ds)
				break
			}
		}
	}
	return out
}

// holdAgain holds again the expired reservations of waiting
// (Extender.waitingPods) on the ledger of disk uuid as the view shows it
// now (holdExpired).
func (f *flight) holdAgain(uuid string, waiting map[string]*corev1.Pod) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ds := f.view.ledger(uuid)
	if ds == nil {
		return
	}
	for volume, pod := range waiting {
		f.holdExpired(ds, volume, pod)
	}
}

// --- Adoption of pods whose node kube-scheduler chose without this filter.

// adoptSnapshot ends the entry of the pod with uid and returns a snapshot
// for adopting the pod on a node (Extender.adoptPod), or nil when its entry
// already knows its node.
func (f *flight) adoptSnapshot(uid types.UID) *snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	if cur := f.overlay.get(uid); cur != nil && cur.node != "" {
		return nil
	}
	f.overlay.drop(uid)
	return f.snapshotLocked()
}

// adopt tracks pod on node with its volumes packed there as ft, evaluated
// on s with the overlay, unless its entry knows its node already. It
// returns false, recording nothing, when ft no longer holds (as track), and
// the pods to adopt afresh.
func (f *flight) adopt(s *snapshot, pod *corev1.Pod, node, how string, ft fit) (bool, []adoption) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if cur := f.overlay.get(pod.UID); cur != nil && cur.node != "" {
		return true, nil
	}
	if !f.overlay.within(s.added, s.claimed, map[string]fit{node: ft}) {
		return false, nil
	}
	entry := &inflight{pod: types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, uid: pod.UID,
		claims: claimNames(pod), offered: map[string]fit{node: ft}, filtered: f.clock.Now()}
	f.overlay.add(entry)
	return true, f.learn(entry, node, how)
}

// following reports whether the pod with uid is in flight, and whether
// its node is known.
func (f *flight) following(uid types.UID) (tracked, known bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	entry := f.overlay.get(uid)
	return entry != nil, entry != nil && entry.node != ""
}

// --- The reservation writer and the binder.

// queueWrites queues the disks of entry's pending volumes. Called with f.mu held.
func (f *flight) queueWrites(entry *inflight) {
	if f.writes == nil {
		return
	}
	for _, disk := range entry.pending {
		f.writes.Add(disk)
	}
}

// wanted returns the reservations entries whose node is known wait for on
// disk, in a stable order, with the ledger as the view holds it. The
// entries of pods being bound through Reserve are left to their Reserve,
// except those of binders, the pods whose Reserve this write is.
func (f *flight) wanted(disk string, binders sets.Set[types.UID]) ([]want, *dsv1.DiskSchedule) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []want
	for _, entry := range f.overlay.byUID { // in any order: the wants are sorted below
		if entry.node == "" || entry.known == knownByNomination || (entry.known == knownByBind && !binders.Has(entry.uid)) {
			continue
		}
		for volume, d := range entry.pending {
			if d == disk {
				out = append(out, want{entry: entry, pod: entry.key(), volume: volume, size: entry.sizes[volume]})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].volume != out[j].volume {
			return out[i].volume < out[j].volume
		}
		return out[i].pod < out[j].pod
	})
	return out, f.view.ledger(disk)
}

// wrote records the write of plan, planned for wants on disk: the
// reservations written, for the metrics; the replicas Longhorn placed,
// whose requests settle their volumes; the entries the ledgers now show;
// and the refusals. A refused entry whose pod is on the node for good
// keeps its claim, except the binders' (the pods whose Reserve this write
// is); the others end it. It returns the wants of the binders that were
// refused.
func (f *flight) wrote(disk string, wants []want, plan reservationPlan, placed map[string]placedReplica, binders sets.Set[types.UID]) []want {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, i := range plan.wrote {
		w := wants[i]
		if f.written[disk] == nil {
			f.written[disk] = map[string]string{}
		}
		f.written[disk][w.volume] = w.pod
	}
	for _, w := range wants {
		if r, ok := placed[w.volume]; ok {
			w.entry.replicas[w.volume] = r
		}
	}
	for _, w := range wants {
		f.settleShown(w.entry)
	}
	var mine []want
	for _, i := range plan.refused {
		w := wants[i]
		if !w.entry.refused[w.volume] {
			f.metrics.Reservations.WithLabelValues("refused").Inc()
		}
		if !binders.Has(w.entry.uid) && keepsClaim(w.entry) {
			// Its pod is on the node for good: the claim stays counted, so
			// no other pod is let onto the space this one waits for, and
			// the reservation is written once the ledger shows room (the
			// ledger's next change queues the disk again).
			w.entry.refused = markVolume(w.entry.refused, w.volume)
			continue
		}
		f.settle(w.entry, w.volume, false)
		if binders.Has(w.entry.uid) {
			mine = append(mine, w)
		}
	}
	return mine
}

// bindDisks narrows the pod's entry to node and returns the disks its
// reservations go to (empty when it needs none), or nil when the pod is
// not in flight, and the pods to adopt afresh.
func (f *flight) bindDisks(uid types.UID, node string) ([]string, []adoption) {
	f.mu.Lock()
	defer f.mu.Unlock()
	entry := f.overlay.get(uid)
	if entry == nil {
		return nil, nil
	}
	later := f.learn(entry, node, knownByBind)
	if entry = f.overlay.get(uid); entry == nil || entry.node != node {
		return nil, later
	}
	seen := map[string]bool{}
	disks := []string{}
	for _, disk := range entry.pending {
		if !seen[disk] {
			seen[disk] = true
			disks = append(disks, disk)
		}
	}
	sort.Strings(disks)
	return disks, later
}
