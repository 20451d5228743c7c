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
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/metrics"
	"github.com/longhorn/diskschedule/internal/placement"
	"github.com/longhorn/diskschedule/internal/settings"
)

// flight is the extender's in-flight state, with its own lock: the view of
// nodes and ledgers the filter reads, the pods in flight (the overlay), the
// reservations written and not yet seen decided, and the pods whose entries
// lapsed. The view is under the same lock as the overlay so that a ledger
// change and the entries it settles are seen together: an entry drops only
// once the view shows what replaces it. Its methods that take the lock are
// the only way in; the others say they are called with it held. It does no
// I/O of its own: what it reads of the cluster besides the informers'
// objects it gets from its hooks.
type flight struct {
	clock   clock.PassiveClock
	metrics *metrics.Extender
	budget  int
	hooks   flightHooks

	mu      sync.Mutex
	view    *view
	overlay *overlay
	// last is the filter's most recent answer, which prioritize reuses.
	last lastFilter
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

// flightHooks are what the in-flight state asks the Extender, which reads
// the cluster through the manager's cache.
type flightHooks struct {
	// load returns the pod's volumes that need local space and the
	// settings in effect. It is called with the lock held.
	load func(ctx context.Context, pod *corev1.Pod) ([]podVolume, settings.Scheduling, error)
	// waitingPod returns the pod a reservation of volume on ds was made
	// for when that pod still needs it. It is called with the lock held.
	waitingPod func(ctx context.Context, ds *dsv1.DiskSchedule, volume string, res dsv1.DiskScheduleReservation) (*corev1.Pod, bool)
	// adoptLater tracks entry's pod on node afresh, in the background
	// (ctx): the filter did not offer it that node. It is called with the
	// lock held and must not wait for it.
	adoptLater func(ctx context.Context, entry *inflight, node, how string)
}

// lastFilter is one pod's filter answer, for prioritize.
type lastFilter struct {
	uid  types.UID
	vols []podVolume
	fits map[string]fit
}

// newFlight returns an empty in-flight state.
func newFlight(clk clock.PassiveClock, m *metrics.Extender, budget int, hooks flightHooks) *flight {
	return &flight{clock: clk, metrics: m, budget: budget, hooks: hooks, view: newView(), overlay: newOverlay(),
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

// --- The filter and the prioritizer.

// filter evaluates the candidates against the ledgers less the overlay,
// records the pod in flight on the nodes it passed, and returns them. When
// none passes, blocked counts the nodes the pod would fit without the
// overlay, and changed is closed when the overlay next changes.
func (f *flight) filter(pod *corev1.Pod, vols []podVolume, candidates []string, sched settings.Scheduling) (
	passed []string, failed map[string]string, blocked int, changed <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.overlay.drop(pod.UID) // a new scheduling cycle of the same pod
	fits := f.evaluateAll(pod, vols, candidates, sched, withOverlay|withRoomElsewhere)
	failed = map[string]string{}
	for _, name := range candidates {
		if ft := fits[name]; ft.OK {
			passed = append(passed, name)
		} else {
			failed[name] = ft.Reason
		}
	}
	f.last = lastFilter{uid: pod.UID, vols: vols, fits: fits}
	ctrl.LoggerFrom(f.background).V(1).Info("Filtered a pod", "pod", client.ObjectKeyFromObject(pod), "passed", passed, "failed", failed, "podsInFlight", f.overlay.len())
	if len(passed) > 0 {
		if sched.PodSchedulingTimeout > 0 {
			f.track(pod, vols, fits)
		}
		return passed, failed, 0, nil
	}
	if f.overlay.len() == 0 {
		return nil, failed, 0, nil
	}
	alone := f.evaluateAll(pod, vols, candidates, sched, withRoomElsewhere)
	for _, name := range candidates {
		if alone[name].OK {
			blocked++
			failed[name] += fmt.Sprintf(" (counting %d pods being scheduled whose space is not in the ledgers yet)", f.overlay.len())
		}
	}
	return nil, failed, blocked, f.overlay.changed
}

// forget drops the pod with uid from the overlay.
func (f *flight) forget(uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.overlay.drop(uid)
}

// lastFilter returns the filter's most recent answer.
func (f *flight) lastFilter() lastFilter {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

// evaluate evaluates every candidate node from the view, as how says.
func (f *flight) evaluate(pod *corev1.Pod, vols []podVolume, candidates []string, sched settings.Scheduling, how int) map[string]fit {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.evaluateAll(pod, vols, candidates, sched, how)
}

// track records pod in flight on the nodes where it fits and needs new
// space. Called with f.mu held.
func (f *flight) track(pod *corev1.Pod, vols []podVolume, fits map[string]fit) {
	entry := &inflight{
		pod:      types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name},
		uid:      pod.UID,
		claims:   claimNames(pod),
		offered:  map[string]fit{},
		filtered: f.clock.Now(),
	}
	for node, ft := range fits {
		if ft.OK && len(ft.Assignment) > 0 {
			entry.offered[node] = ft
		}
	}
	if len(entry.offered) == 0 {
		return
	}
	f.overlay.add(entry)
	f.metrics.InFlight.Set(float64(f.overlay.len()))
}

// What evaluateAll counts besides the ledgers and the pod's local volumes.
const (
	// withOverlay takes off what the pods in flight claim.
	withOverlay = 1 << iota
	// withRoomElsewhere fails a node where the pod's volumes fit when
	// Longhorn would find no room for their other replicas (roomElsewhere).
	withRoomElsewhere
)

// evaluateAll evaluates every candidate node from the view, as how says.
// Called with f.mu held.
func (f *flight) evaluateAll(pod *corev1.Pod, vols []podVolume, candidates []string, sched settings.Scheduling, how int) map[string]fit {
	var claimed func(string) int64
	if how&withOverlay != 0 && f.overlay.len() > 0 {
		claimed = f.overlay.demand
	}
	var cluster []placement.Node // every Longhorn node, read once when needed
	var seen placements
	podKey := pod.Namespace + "/" + pod.Name
	fits := make(map[string]fit, len(candidates))
	for _, name := range candidates {
		ft := evaluateReading(vols, f.view.reading(name), claimed, sched, podKey, f.budget)
		if ft.Steps > 0 {
			f.metrics.PackingSteps.Observe(float64(ft.Steps))
			if !ft.Exact {
				f.metrics.PackingFallbacks.Inc()
			}
		}
		if ft.OK && how&withRoomElsewhere != 0 {
			if cluster == nil {
				cluster = f.view.placementNodes()
				seen = newPlacements(cluster)
			}
			if why := roomElsewhere(vols, name, cluster, sched, seen); why != "" {
				ft = fit{Reason: why}
			}
		}
		fits[name] = ft
	}
	return fits
}

// --- The informers' events.

// nodeEvent records Longhorn's node n, or forgets it when gone.
func (f *flight) nodeEvent(n *lhv1.Node, gone bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if gone {
		f.view.deleteNode(n.Name)
		return
	}
	f.view.setNode(n)
}

// ledgerEvent records ds in the view, or forgets it when gone, and
// settles what the change shows.
func (f *flight) ledgerEvent(ds *dsv1.DiskSchedule, gone bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if gone {
		f.view.deleteLedger(ds.Name)
		return
	}
	f.view.setLedger(ds)
	f.ledgerChanged(ds)
}

// ledgerChanged settles the overlay entries that ds now shows, counts the
// decisions on reservations the extender wrote, and queues the disk again
// while an entry still waits for a write there. Called with f.mu held.
func (f *flight) ledgerChanged(ds *dsv1.DiskSchedule) {
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
	for volume := range ds.Spec.Reservations {
		if res, state, _ := ledger.ReservationOf(ds, volume); state == dsv1.ReservationStateExpired && res.Pod != "" {
			f.holdExpired(ds, volume, res)
		}
	}
	waiting := false
	for _, entry := range f.overlay.entries() {
		if entry.node != ds.Spec.NodeID || entry.known == knownByNomination {
			continue
		}
		f.settleShown(entry)
		for volume, disk := range entry.pending {
			_, placed := entry.replicas[volume]
			waiting = waiting || (disk == ds.Name && !placed)
		}
	}
	if waiting && f.writes != nil {
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
// end when deleted. A pod bound after its entry lapsed (kube-scheduler's
// binding took longer than scheduler-extender-pod-scheduling-timeout) is
// tracked again: its volumes are packed onto its node's disks and
// reserved, under the same lock as the binding's event, so no filter sees
// the space free meanwhile.
func (f *flight) podEvent(pod *corev1.Pod, gone bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	entry := f.overlay.get(pod.UID)
	if entry == nil {
		f.bindLapsed(pod, gone)
		return
	}
	switch {
	case gone || pod.DeletionTimestamp != nil:
		f.expire(entry, "deleted")
	case pod.Spec.NodeName != "":
		f.learn(entry, pod.Spec.NodeName, knownByBinding)
	case entry.node != "":
	case pod.Status.NominatedNodeName != "":
		f.learn(entry, pod.Status.NominatedNodeName, knownByNomination)
	}
	// A PodScheduled=False condition is no sign that the cycle the filter
	// answered failed: kube-scheduler writes a failed cycle's condition
	// asynchronously, so it can arrive after the filter of the pod's next
	// cycle, which may be binding the pod. A failed cycle's entry ends with
	// the pod's next filter or the pod-scheduling timeout.
}

// bindLapsed tracks a pod bound after its entry lapsed. Called with f.mu held.
func (f *flight) bindLapsed(pod *corev1.Pod, gone bool) {
	if _, lapsed := f.lapsed[pod.UID]; !lapsed || (pod.Spec.NodeName == "" && !gone && pod.DeletionTimestamp == nil) {
		return
	}
	delete(f.lapsed, pod.UID)
	if gone || pod.DeletionTimestamp != nil {
		return
	}
	if err := f.adoptLocked(f.background, pod, pod.Spec.NodeName, knownByBinding); err != nil {
		ctrl.LoggerFrom(f.background).Info("A pod bound after its space lapsed does not fit its node", "pod", client.ObjectKeyFromObject(pod),
			"node", pod.Spec.NodeName, "reason", err.Error())
	}
}

// claimEvent learns the node of the pods in flight that use pvc once
// kube-scheduler's volume binding selected a node for it.
func (f *flight) claimEvent(pvc *corev1.PersistentVolumeClaim) {
	node := pvc.Annotations[annSelectedNode]
	if node == "" {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, entry := range f.overlay.entries() {
		if entry.pod.Namespace == pvc.Namespace && slices.Contains(entry.claims, pvc.Name) {
			f.learn(entry, node, knownBySelectedNode)
		}
	}
}

// learn narrows entry to node and, unless node is only nominated, queues
// the writes of its reservations. An entry that did not offer node, or was
// narrowed to another node by a nomination, is dropped and its pod adopted
// on node afresh. Called with f.mu held.
func (f *flight) learn(entry *inflight, node, how string) {
	if entry.node != "" && (entry.node == node || how == knownByNomination) {
		if entry.known == knownByNomination && how != knownByNomination {
			entry.known = how
			f.queueWrites(entry)
		}
		return
	}
	if entry.node != "" {
		f.overlay.drop(entry.uid)
		f.hooks.adoptLater(f.background, entry, node, how)
		return
	}
	f.metrics.PodSchedulingWait.WithLabelValues("true").Observe(f.clock.Since(entry.filtered).Seconds())
	if !f.overlay.narrow(entry, node, how, f.clock.Now()) {
		f.hooks.adoptLater(f.background, entry, node, how)
		return
	}
	if how != knownByNomination {
		f.settleShown(entry)
	}
	if how != knownByNomination && how != knownByBind {
		f.queueWrites(entry) // Bind writes its pod's reservations itself
	}
	f.metrics.InFlight.Set(float64(f.overlay.len()))
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
	for _, entry := range f.overlay.entries() {
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

// holdExpired keeps counting, in the overlay, the space of a reservation
// that expired while its pod, bound to node, still waits for Longhorn to
// place its volume's replica there, and queues it to be written again. The
// ledger holds the reservation of a bound pod (DESIGN rule 6), so this
// happens only when the pod bound after the decision that expired it. It
// runs under the same lock as the view's update that shows the expiry, so
// no filter sees the space free in between. Called with f.mu held.
func (f *flight) holdExpired(ds *dsv1.DiskSchedule, volume string, res dsv1.DiskScheduleReservation) {
	if f.writes == nil {
		return
	}
	pod, ok := f.hooks.waitingPod(f.background, ds, volume, res)
	if !ok {
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

// --- Adoption of pods whose node kube-scheduler chose without this filter.

// adopt tracks pod on node, which kube-scheduler chose without this
// extender's answer being known (another cycle's, or another leader's): its
// volumes that need new space there are packed onto the node's disks and
// reserved like those of a filtered pod. It reports whether the pod is in
// flight afterwards. ctx is for the hooks' reads.
func (f *flight) adopt(ctx context.Context, pod *corev1.Pod, node, how string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	err := f.adoptLocked(ctx, pod, node, how)
	return f.overlay.get(pod.UID) != nil, err
}

// adoptLocked is adopt with f.mu held.
func (f *flight) adoptLocked(ctx context.Context, pod *corev1.Pod, node, how string) error {
	if cur := f.overlay.get(pod.UID); cur != nil && cur.node != "" {
		return nil
	}
	vols, sched, err := f.hooks.load(ctx, pod)
	if err != nil || len(vols) == 0 {
		return err
	}
	f.overlay.drop(pod.UID)
	// The pod is on node already: its local space is reserved whatever room
	// Longhorn finds for the other replicas.
	fits := f.evaluateAll(pod, vols, []string{node}, sched, withOverlay)
	ft := fits[node]
	if !ft.OK {
		return fmt.Errorf("its volumes do not fit on node %s: %s", node, ft.Reason)
	}
	if len(ft.Assignment) == 0 {
		return nil
	}
	entry := &inflight{pod: types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, uid: pod.UID,
		claims: claimNames(pod), offered: map[string]fit{node: ft}, filtered: f.clock.Now()}
	f.overlay.add(entry)
	f.learn(entry, node, how)
	return nil
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
// entries of pods being bound through /bind are left to their Bind, except
// binding's own.
func (f *flight) wanted(disk string, binding types.UID) ([]want, *dsv1.DiskSchedule) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []want
	for _, entry := range f.overlay.entries() {
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
	return out, f.view.ledger(disk)
}

// wrote records the write of plan, planned for wants on disk: the
// reservations written, for the metrics; the replicas Longhorn placed,
// whose requests settle their volumes; the entries the ledgers now show;
// and the refusals. A refused entry whose pod is on the node for good
// keeps its claim, except onlyPod's (a pod's UID, when its Bind writes);
// the others end it. It returns the wants of onlyPod that were refused.
func (f *flight) wrote(disk string, wants []want, plan reservationPlan, placed map[string]placedReplica, onlyPod types.UID) []want {
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
		if w.entry.uid != onlyPod && keepsClaim(w.entry) {
			// Its pod is on the node for good: the claim stays counted, so
			// no other pod is let onto the space this one waits for, and
			// the reservation is written once the ledger shows room (the
			// ledger's next change queues the disk again).
			w.entry.refused = markVolume(w.entry.refused, w.volume)
			continue
		}
		f.settle(w.entry, w.volume, false)
		if w.entry.uid == onlyPod {
			mine = append(mine, w)
		}
	}
	return mine
}

// bindDisks narrows the pod's entry to node and returns the disks its
// reservations go to (empty when it needs none), or nil when the pod is
// not in flight.
func (f *flight) bindDisks(uid types.UID, node string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	entry := f.overlay.get(uid)
	if entry == nil {
		return nil
	}
	f.learn(entry, node, knownByBind)
	if entry = f.overlay.get(uid); entry == nil || entry.node != node {
		return nil
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
	return disks
}
