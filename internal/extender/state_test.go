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
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/extender/packing"
	"github.com/longhorn/diskschedule/internal/metrics"
	"github.com/longhorn/diskschedule/internal/settings"
)

// flightFixture is an in-flight state over node-a, one 100Gi disk whose
// ledger is node-a-uuid-1, with no API server: the test plays the
// informers and the writer.
type flightFixture struct {
	t      *testing.T
	clock  *clocktesting.FakeClock
	flight *flight
	queue  writeQueue
	ledger *dsv1.DiskSchedule
	// vols are the local volumes the load hook returns, by pod name.
	vols map[string][]podVolume
}

const flightDisk = "node-a-uuid-1"

func newFlightFixture(t *testing.T, used int64) *flightFixture {
	t.Helper()
	ff := &flightFixture{t: t, clock: clocktesting.NewFakeClock(time.Now()), vols: map[string][]podVolume{}}
	hooks := flightHooks{
		load: func(_ context.Context, pod *corev1.Pod) ([]podVolume, settings.Scheduling, error) {
			return ff.vols[pod.Name], settings.Default(), nil
		},
		waitingPod: func(context.Context, *dsv1.DiskSchedule, string, dsv1.DiskScheduleReservation) (*corev1.Pod, bool) {
			return nil, false
		},
		adoptLater: func(context.Context, *inflight, string, string) {
			t.Error("no pod in these tests goes to a node it was not offered")
		},
	}
	ff.flight = newFlight(ff.clock, metrics.NewExtender(prometheus.NewRegistry()), packing.DefaultBudget, hooks)
	ff.queue = workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	t.Cleanup(ff.queue.ShutDown)
	ff.flight.run(context.Background(), ff.queue)
	n, ledgers := testNode("node-a", []int64{100 * gi}, []int64{used})
	ff.flight.nodeEvent(n, false)
	ff.ledger = ledgers[flightDisk]
	ff.ledger.ResourceVersion = "1"
	ff.flight.ledgerEvent(ff.ledger, false)
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
	passed, failed, blocked, _ := ff.flight.filter(pod, ff.vols[pod.Name], []string{"node-a"}, settings.Default())
	return passed, failed, blocked
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
	wants, ds := ff.flight.wanted(flightDisk, onlyPod)
	if ds == nil {
		ff.t.Fatal("the view has no ledger for the disk")
	}
	plan := planReservations(wants, ds, nil)
	next := ds.DeepCopy()
	plan.apply(next)
	mine := ff.flight.wrote(flightDisk, wants, plan, nil, onlyPod)
	ff.setLedger(next)
	return mine
}

// setLedger shows ds, a new version of the disk's ledger, to the in-flight state.
func (ff *flightFixture) setLedger(ds *dsv1.DiskSchedule) {
	ds = ds.DeepCopy()
	ds.ResourceVersion += "1"
	ff.ledger = ds
	ff.flight.ledgerEvent(ds, false)
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

	ff.flight.podEvent(bound(a), false)
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

	ff.flight.podEvent(bound(a), false)
	if disks := ff.flight.bindDisks(c.UID, "node-a"); len(disks) != 1 || disks[0] != flightDisk {
		t.Fatalf("pod c's Bind writes to %v, want [%s]", disks, flightDisk)
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

	ff.flight.podEvent(bound(a), false)
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
