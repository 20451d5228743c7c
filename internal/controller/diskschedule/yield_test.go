package diskschedule_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/controller/diskschedule"
	"github.com/longhorn/diskschedule/internal/manager"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

// TestReservationYieldsToLonghorn checks rule 6's last sentences against a
// real API server: a reservation held for a bound pod never makes the
// ledger refuse a Longhorn placement that fits what Longhorn counts. A
// best-effort volume's reservation yields at once, in the same status
// write, with an Event on its pod, which keeps its node; a strict-local
// volume's holds until its pod has been bound for the node reservation
// timeout, then yields.
func TestReservationYieldsToLonghorn(t *testing.T) {
	ctx := t.Context()
	clk := clocktesting.NewFakePassiveClock(time.Now())
	l := newLedgerWith(t, ctx, 200*gi, manager.Options{Clock: clk})
	node := l.ns + "-node"
	timeout := 5 * time.Second // scheduler-extender-node-reservation-timeout's default

	hold := func(volume string, locality lhv1.DataLocality) {
		t.Helper()
		v := testenv.Volume(l.ns, volume, testenv.VolumeFixture{Size: 150 * gi, Replicas: 1, DataLocality: locality})
		if err := testenv.CreateLonghorn(ctx, env.Client, v); err != nil {
			t.Fatal(err)
		}
		createPod(t, ctx, l.ns, "pod-"+volume)
		bindPod(t, ctx, l.ns, "pod-"+volume, node)
		l.write(func(s *dsv1.DiskScheduleSpec) {
			s.Reservations = map[string]dsv1.DiskScheduleReservation{volume: {Size: 150 * gi, Pod: l.ns + "/pod-" + volume}}
		})
		l.waitFor("the bound pod's reservation is held", func(ds *dsv1.DiskSchedule) bool {
			st := ds.Status.Reservations[volume]
			return st.State == dsv1.ReservationStateScheduled && st.ExpiresAt == nil
		})
	}
	place := func(replica string) *dsv1.DiskSchedule {
		t.Helper()
		return l.write(func(s *dsv1.DiskScheduleSpec) {
			s.Replicas = map[string]dsv1.RequestedBytes{replica: dsv1.RequestedBytes(100 * gi)}
		})
	}

	// Best-effort: Longhorn's 100Gi replica fits its own count (nothing
	// persisted) though the reservation leaves 50Gi: the reservation yields.
	hold("vol-be", lhv1.DataLocalityBestEffort)
	ds := place("r-other-1")
	l.expectReplica(ds, "r-other-1", dsv1.RequestStateScheduled, 100*gi)
	st := ds.Status.Reservations["vol-be"]
	if st.State != dsv1.ReservationStateExpired || st.ScheduledSize != 0 || !strings.HasPrefix(st.Message, "yielded to replica r-other-1") {
		t.Errorf("best-effort reservation = %+v, want yielded in the write that granted the replica", st)
	}
	l.expectScheduled(ds, 100*gi)
	pod := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: l.ns, Name: "pod-vol-be"}, pod); err != nil || pod.Spec.NodeName != node {
		t.Errorf("pod of the yielded reservation on %q (%v), want it kept on %s", pod.Spec.NodeName, err, node)
	}
	waitPodEvent(t, ctx, l.ns, "pod-vol-be", diskschedule.ReasonReservationYielded, "yielded to replica r-other-1")

	// Strict-local: held, the placement refused, until the pod has been
	// bound for the timeout; then it yields.
	l.write(func(s *dsv1.DiskScheduleSpec) { s.Replicas = nil; s.Reservations = nil })
	hold("vol-sl", lhv1.DataLocalityStrictLocal)
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: l.ns, Name: "pod-vol-sl"}, pod); err != nil {
		t.Fatal(err)
	}
	var boundAt time.Time
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			boundAt = c.LastTransitionTime.Time
		}
	}
	if boundAt.IsZero() {
		t.Fatalf("bound pod has no PodScheduled condition: %+v", pod.Status.Conditions)
	}
	clk.SetTime(boundAt.Add(timeout - time.Second))
	ds = place("r-other-2")
	l.expectReplica(ds, "r-other-2", dsv1.RequestStateRejected, 0)
	if msg := ds.Status.Replicas["r-other-2"].Message; !strings.Contains(msg, "reservations that do not yield yet hold 150Gi") {
		t.Errorf("refusal %q does not name the reservation that holds", msg)
	}
	clk.SetTime(boundAt.Add(timeout))
	l.write(func(s *dsv1.DiskScheduleSpec) { delete(s.Replicas, "r-other-2") })
	ds = place("r-other-3")
	l.expectReplica(ds, "r-other-3", dsv1.RequestStateScheduled, 100*gi)
	if st := ds.Status.Reservations["vol-sl"]; st.State != dsv1.ReservationStateExpired || !strings.HasPrefix(st.Message, "yielded to replica r-other-3") {
		t.Errorf("strict-local reservation past its bound = %+v, want yielded", st)
	}
	waitPodEvent(t, ctx, l.ns, "pod-vol-sl", diskschedule.ReasonReservationYielded, "yielded to replica r-other-3")
}

// waitPodEvent waits for an Event of reason on the named pod whose note
// contains text.
func waitPodEvent(t *testing.T, ctx context.Context, namespace, pod, reason, text string) {
	t.Helper()
	testenv.Eventually(t, ctx, ledgerTimeout, fmt.Sprintf("a %s Event on pod %s", reason, pod), func(ctx context.Context) (bool, string, error) {
		list := &eventsv1.EventList{}
		if err := env.Client.List(ctx, list, client.InNamespace(namespace)); err != nil {
			return false, "", err
		}
		var seen []string
		for _, ev := range list.Items {
			if ev.Regarding.Kind == "Pod" && ev.Regarding.Name == pod {
				if ev.Reason == reason && strings.Contains(ev.Note, text) {
					return true, "", nil
				}
				seen = append(seen, ev.Reason+": "+ev.Note)
			}
		}
		return false, fmt.Sprintf("%q", seen), nil
	})
}
