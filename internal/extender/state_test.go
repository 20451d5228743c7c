package extender

import (
	"context"
	"strings"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/extender/packing"
	"github.com/longhorn/diskschedule/internal/metrics"
	"github.com/longhorn/diskschedule/internal/settings"
)

// flightFixture is an in-flight state over node-a, one 100Gi disk whose
// ledger is node-a-uuid-1, with the extender's decision over it and no API
// server: the test plays the informers, the cache and the writer.
type flightFixture struct {
	t      *testing.T
	clock  *clocktesting.FakeClock
	ext    *Extender
	flight *flight
	queue  writeQueue
	ledger *dsv1.DiskSchedule
	// vols are the pods' local volumes as the cache would resolve them, by
	// pod name.
	vols map[string][]podVolume
}

const flightDisk = "node-a-uuid-1"

func newFlightFixture(t *testing.T, used int64) *flightFixture {
	t.Helper()
	ff := &flightFixture{t: t, clock: clocktesting.NewFakeClock(time.Now()), vols: map[string][]podVolume{}}
	m := metrics.NewExtender(prometheus.NewRegistry())
	ff.ext = &Extender{opts: Options{Clock: ff.clock, Metrics: m, Budget: packing.DefaultBudget}, background: context.Background()}
	ff.ext.flight = newFlight(ff.clock, m)
	ff.flight = ff.ext.flight
	ff.queue = workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	t.Cleanup(ff.queue.ShutDown)
	ff.flight.run(context.Background(), ff.queue)
	n, ledgers := testNode("node-a", []int64{100 * gi}, []int64{used})
	ff.flight.nodeEvent(n, false)
	ff.ledger = ledgers[flightDisk]
	ff.ledger.ResourceVersion = "1"
	ff.flight.ledgerEvent(ff.ledger, false, nil)
	return ff
}

// pod returns pod name with one best-effort volume of size bytes.
func (ff *flightFixture) pod(name string, size int64) *corev1.Pod {
	ff.vols[name] = []podVolume{{Name: "vol-" + name, Size: size, ReplicaNodes: map[string]bool{},
		kind: kind{DataLocality: lhv1.DataLocalityBestEffort, NumberOfReplicas: 1}}}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}}
}

// filter filters pod on node-a.
func (ff *flightFixture) filter(pod *corev1.Pod) ([]string, map[string]string, int) {
	passed, failed, blocked, _ := ff.ext.decide(context.Background(), pod, ff.vols[pod.Name], []string{"node-a"}, settings.Default())
	return passed, failed, blocked
}

// podEvent shows pod's new version to the in-flight state as the
// extender's pod handler does (Extender.podEvent), with the pod's volumes
// from vols: a pod bound after its entry lapsed is tracked again.
func (ff *flightFixture) podEvent(pod *corev1.Pod) {
	ff.t.Helper()
	later, lapsed := ff.flight.podEvent(pod, false)
	if lapsed {
		_, again, err := ff.ext.adoptVolumes(pod, ff.vols[pod.Name], settings.Default(), pod.Spec.NodeName, knownByBinding)
		if err != nil {
			ff.t.Errorf("tracking pod %s again on node %s: %v", pod.Name, pod.Spec.NodeName, err)
		}
		later = append(later, again...)
	}
	if len(later) > 0 {
		ff.t.Errorf("no pod in these tests goes to a node it was not offered: %+v", later)
	}
}

// bound returns pod bound to node-a.
func bound(pod *corev1.Pod) *corev1.Pod {
	out := pod.DeepCopy()
	out.Spec.NodeName = "node-a"
	return out
}

// write plans and records the write of the disk's reservations, as
// writeDisk does, on the ledger as the test holds it, and shows the
// ledger after the write to the in-flight state. It returns the refused
// wants of onlyPod.
func (ff *flightFixture) write(onlyPod types.UID) []want {
	ff.t.Helper()
	var binders sets.Set[types.UID]
	if onlyPod != "" {
		binders = sets.New(onlyPod)
	}
	wants, ds := ff.flight.wanted(flightDisk, binders)
	if ds == nil {
		ff.t.Fatal("the view has no ledger for the disk")
	}
	plan := planReservations(wants, ds, nil)
	next := ds.DeepCopy()
	plan.apply(next)
	mine := ff.flight.wrote(flightDisk, wants, plan, nil, binders)
	ff.setLedger(next)
	return mine
}

// setLedger shows ds, a new version of the disk's ledger, to the in-flight state.
func (ff *flightFixture) setLedger(ds *dsv1.DiskSchedule) {
	ds = ds.DeepCopy()
	ds.ResourceVersion += "1"
	ff.ledger = ds
	ff.flight.ledgerEvent(ds, false, nil)
}

// inFlight returns how many pods are in flight.
func (ff *flightFixture) inFlight() int {
	ff.flight.mu.Lock()
	defer ff.flight.mu.Unlock()
	return ff.flight.overlay.len()
}

// TestFlightCountsAPodUntilTheLedgerShowsIt: a pod let through counts on
// the node until its reservation is in the ledger; meanwhile another pod
// that only the pod in flight keeps off the node is blocked, and after it
// the ledger's pending reservation counts.
func TestFlightCountsAPodUntilTheLedgerShowsIt(t *testing.T) {
	ff := newFlightFixture(t, 0)
	a, b := ff.pod("a", 60*gi), ff.pod("b", 60*gi)
	if passed, failed, _ := ff.filter(a); len(passed) != 1 {
		t.Fatalf("pod a must fit node-a: %v", failed)
	}
	if passed, failed, blocked := ff.filter(b); len(passed) != 0 || blocked != 1 || !strings.Contains(failed["node-a"], "counting 1 pods") {
		t.Fatalf("pod b must be blocked by pod a in flight: passed %v, blocked %d, failed %v", passed, blocked, failed)
	}

	ff.podEvent(bound(a))
	if ff.queue.Len() != 1 {
		t.Fatalf("pod a's binding must queue its disk's write, queue holds %d", ff.queue.Len())
	}
	if refused := ff.write(""); len(refused) != 0 {
		t.Fatalf("nothing is refused on an empty disk: %v", refused)
	}
	if res := ff.ledger.Spec.Reservations["vol-a"]; res.Pod != "ns/a" || res.Size != 60*gi {
		t.Fatalf("pod a's reservation = %+v", res)
	}
	if n := ff.inFlight(); n != 0 {
		t.Errorf("once the ledger shows pod a's reservation it is no longer in flight; %d pods are", n)
	}
	if passed, failed, blocked := ff.filter(b); len(passed) != 0 || blocked != 0 || !strings.Contains(failed["node-a"], "40Gi") {
		t.Errorf("pod b: the pending reservation leaves 40Gi; passed %v, blocked %d, failed %v", passed, blocked, failed)
	}
}

// TestFlightRefusal: the ledger has no room left. A pod bound to the node
// keeps its claim and its volume is marked refused; a pod being bound
// through Bind gets the refusal and its claim ends.
func TestFlightRefusal(t *testing.T) {
	ff := newFlightFixture(t, 0)
	a, c := ff.pod("a", 60*gi), ff.pod("c", 30*gi)
	for _, pod := range []*corev1.Pod{a, c} {
		if passed, failed, _ := ff.filter(pod); len(passed) != 1 {
			t.Fatalf("pod %s must fit node-a: %v", pod.Name, failed)
		}
	}
	// Longhorn takes 80Gi meanwhile: 20Gi are left.
	full := ff.ledger.DeepCopy()
	full.Status.StorageScheduled = 80 * gi
	ff.setLedger(full)

	ff.podEvent(bound(a))
	if disks, later := ff.flight.bindDisks(c.UID, "node-a"); len(disks) != 1 || disks[0] != flightDisk || len(later) != 0 {
		t.Fatalf("pod c's Bind writes to %v, want [%s], and adopts %+v afresh, want none", disks, flightDisk, later)
	}
	refused := ff.write(c.UID)
	if len(refused) != 1 || refused[0].pod != "ns/c" {
		t.Fatalf("pod c's Bind must be refused its 30Gi, got %+v", refused)
	}
	if len(ff.ledger.Spec.Reservations) != 0 {
		t.Errorf("a refused reservation must not be written: %v", ff.ledger.Spec.Reservations)
	}
	ff.flight.mu.Lock()
	entryA, entryC := ff.flight.overlay.get(a.UID), ff.flight.overlay.get(c.UID)
	ff.flight.mu.Unlock()
	if entryA == nil || !entryA.refused["vol-a"] {
		t.Errorf("bound pod a must keep its claim, marked refused: %+v", entryA)
	}
	if entryC != nil {
		t.Errorf("pod c's claim must end with its refused Bind: %+v", entryC)
	}
}

// TestFlightBindThatCouldNotWriteIsWrittenOnceBound: pod a's Bind finds
// the ledger still showing its decision on an earlier reservation of a's
// volume, which expired: the Bind drops it and cannot write the new one
// until the ledger drops that decision. Once the pod is bound, the
// reservation is the writer's, which writes it after the ledger's next
// status, and the pod stops counting in flight when the ledger shows it.
func TestFlightBindThatCouldNotWriteIsWrittenOnceBound(t *testing.T) {
	ff := newFlightFixture(t, 0)
	a := ff.pod("a", 60*gi)
	expired := ff.ledger.DeepCopy()
	expired.Spec.Reservations = map[string]dsv1.DiskScheduleReservation{"vol-a": {Size: 60 * gi, Pod: "ns/a"}}
	expired.Status.Reservations = map[string]dsv1.ReservationStatus{"vol-a": {State: dsv1.ReservationStateExpired,
		RequestedSize: 60 * gi, Pod: "ns/a", Message: "expired"}}
	ff.setLedger(expired)
	if passed, failed, _ := ff.filter(a); len(passed) != 1 {
		t.Fatalf("pod a must fit node-a, its reservation having expired: %v", failed)
	}
	if disks, _ := ff.flight.bindDisks(a.UID, "node-a"); len(disks) != 1 {
		t.Fatalf("pod a's Bind writes to %v, want [%s]", disks, flightDisk)
	}
	if refused := ff.write(a.UID); len(refused) != 0 {
		t.Fatalf("nothing is refused on an empty disk: %v", refused)
	}
	if _, ok := ff.ledger.Spec.Reservations["vol-a"]; ok {
		t.Fatalf("the Bind must drop the expired reservation and not write one the ledger would read as decided: %v", ff.ledger.Spec.Reservations)
	}
	// The ledger drops its decision on the removed key (rule 4), then the
	// pod is bound.
	dropped := ff.ledger.DeepCopy()
	dropped.Status.Reservations = nil
	ff.setLedger(dropped)
	ff.podEvent(bound(a))
	if n := ff.inFlight(); n != 1 {
		t.Fatalf("pod a counts in flight until its reservation is written; %d pods are", n)
	}
	if refused := ff.write(""); len(refused) != 0 {
		t.Fatalf("the writer is refused nothing: %v", refused)
	}
	if res := ff.ledger.Spec.Reservations["vol-a"]; res.Pod != "ns/a" || res.Size != 60*gi {
		t.Fatalf("once pod a is bound, the writer must write its reservation; the ledger holds %+v", ff.ledger.Spec.Reservations)
	}
	if n := ff.inFlight(); n != 0 {
		t.Errorf("once the ledger shows pod a's reservation it is no longer in flight; %d pods are", n)
	}
}

// TestFlightSweepThenBoundLate: a pod that got no node within the
// pod-scheduling timeout stops counting; bound later, it is tracked again
// on its node under the binding's event.
func TestFlightSweepThenBoundLate(t *testing.T) {
	ff := newFlightFixture(t, 0)
	a := ff.pod("a", 60*gi)
	if passed, failed, _ := ff.filter(a); len(passed) != 1 {
		t.Fatalf("pod a must fit node-a: %v", failed)
	}
	timeout := settings.Default().PodSchedulingTimeout
	ff.clock.Step(timeout)
	ff.flight.sweep(timeout)
	if n := ff.inFlight(); n != 1 {
		t.Fatalf("at the timeout itself pod a still counts; %d pods in flight", n)
	}
	ff.clock.Step(time.Millisecond)
	ff.flight.sweep(timeout)
	if n := ff.inFlight(); n != 0 {
		t.Fatalf("past the timeout pod a no longer counts; %d pods in flight", n)
	}

	ff.podEvent(bound(a))
	ff.flight.mu.Lock()
	entry := ff.flight.overlay.get(a.UID)
	ff.flight.mu.Unlock()
	if entry == nil || entry.node != "node-a" || entry.pending["vol-a"] != flightDisk {
		t.Fatalf("pod a bound late must count on node-a's disk again: %+v", entry)
	}
	if ff.queue.Len() != 1 {
		t.Errorf("pod a bound late must queue its disk's write, queue holds %d", ff.queue.Len())
	}
}

// question returns what pod's filter asks on node-a, counting the pods in
// flight.
func (ff *flightFixture) question(pod *corev1.Pod) question {
	return question{pod: pod.Namespace + "/" + pod.Name, vols: ff.vols[pod.Name], candidates: []string{"node-a"},
		sched: settings.Default(), how: withOverlay, budget: packing.DefaultBudget}
}

// TestFlightTracksOnlyWhatStillFits: two filters evaluate the same
// snapshot at once, each finding 100Gi free for its 60Gi. The first to
// record its pod in flight wins; the second is refused, since the pods in
// flight now claim more on the disk it was packed onto, and its filter,
// evaluated again, is blocked by the first pod.
func TestFlightTracksOnlyWhatStillFits(t *testing.T) {
	ff := newFlightFixture(t, 0)
	a, b := ff.pod("a", 60*gi), ff.pod("b", 60*gi)
	s := ff.flight.snapshot("")
	fitsA, fitsB := evaluate(s, ff.question(a)), evaluate(s, ff.question(b))
	if !fitsA["node-a"].OK || !fitsB["node-a"].OK {
		t.Fatalf("on the snapshot both pods fit node-a alone: %+v, %+v", fitsA, fitsB)
	}
	if !ff.flight.track(s, a, fitsA) {
		t.Fatal("pod a, the first recorded, must be tracked")
	}
	if ff.flight.track(s, b, fitsB) {
		t.Fatal("pod b's verdict from before pod a was tracked must be refused")
	}
	if n := ff.inFlight(); n != 1 {
		t.Fatalf("only pod a is in flight; %d pods are", n)
	}
	if passed, failed, blocked := ff.filter(b); len(passed) != 0 || blocked != 1 || !strings.Contains(failed["node-a"], "counting 1 pods") {
		t.Errorf("pod b, evaluated again, must be blocked by pod a: passed %v, blocked %d, failed %v", passed, blocked, failed)
	}
}

// TestFlightTracksAcrossChangesThatTakeNothing: what happened since a
// snapshot does not refuse a verdict when it takes none of the space the
// pod was packed onto: a pod tracked on another disk, a pod that left.
func TestFlightTracksAcrossChangesThatTakeNothing(t *testing.T) {
	ff := newFlightFixture(t, 0)
	a, b, c := ff.pod("a", 30*gi), ff.pod("b", 30*gi), ff.pod("c", 30*gi)
	if passed, failed, _ := ff.filter(a); len(passed) != 1 {
		t.Fatalf("pod a must fit node-a: %v", failed)
	}
	s := ff.flight.snapshot("")
	fitsB := evaluate(s, ff.question(b))
	// Meanwhile pod a's cycle ends and pod c is tracked on a disk of another
	// node only.
	ff.flight.forget(a.UID)
	elsewhere := fit{OK: true, Assignment: map[string]string{"vol-c": "node-b-uuid-1"}, Sizes: map[string]int64{"vol-c": 30 * gi}}
	if !ff.flight.track(ff.flight.snapshot(""), c, map[string]fit{"node-b": elsewhere}) {
		t.Fatal("pod c must be tracked on node-b")
	}
	if !ff.flight.track(s, b, fitsB) {
		t.Error("pod b's verdict must stand: nothing since its snapshot claims more on node-a's disk")
	}
}

// TestFlightSnapshotIsNotChangedByEvents: a snapshot handed to an
// evaluation keeps the ledgers and the claims it was taken with, whatever
// the informers and the filters do next; the next snapshot shows them.
func TestFlightSnapshotIsNotChangedByEvents(t *testing.T) {
	ff := newFlightFixture(t, 0)
	a, b := ff.pod("a", 60*gi), ff.pod("b", 30*gi)
	before := ff.flight.snapshot("")
	full := ff.ledger.DeepCopy()
	full.Status.StorageScheduled = 80 * gi
	ff.setLedger(full)
	if passed, failed, _ := ff.filter(b); len(passed) != 0 || !strings.Contains(failed["node-a"], "20Gi") {
		t.Fatalf("pod b does not fit the 20Gi left: passed %v, failed %v", passed, failed)
	}
	ff.flight.mu.Lock()
	ff.flight.overlay.add(offer("x", "vol-x", 10*gi, "node-a"))
	ff.flight.mu.Unlock()

	if ft := evaluate(before, ff.question(a))["node-a"]; !ft.OK || ft.Free != 40*gi {
		t.Errorf("on the snapshot taken before, pod a fits the empty disk with 40Gi left: %+v", ft)
	}
	if before.inFlight != 0 || len(before.claimed) != 0 {
		t.Errorf("the snapshot taken before counts no pod in flight: %d, %v", before.inFlight, before.claimed)
	}
	after := ff.flight.snapshot("")
	if ft := evaluate(after, ff.question(a))["node-a"]; ft.OK || !strings.Contains(ft.Reason, "20Gi") {
		t.Errorf("on a snapshot taken after, pod a does not fit the 20Gi left: %+v", ft)
	}
	if after.inFlight != 1 || after.claimed["node-a-d"] != 10*gi {
		t.Errorf("a snapshot taken after counts pod x in flight: %d, %v", after.inFlight, after.claimed)
	}
}
