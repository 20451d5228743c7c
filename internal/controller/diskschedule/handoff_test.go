package diskschedule_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/controller/config"
	"github.com/longhorn/diskschedule/internal/settings"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

// TestHandoffAndExpiry fills a disk exactly with a granted replica and a
// reservation, then adds in one spec update the replica the reservation is
// handed to and a competitor: the handoff replica takes the reserved space
// and the competitor is rejected. An unfulfilled reservation then expires
// at the timeout setting's end and frees its space. The ledger's clock is
// fake and moves only when the test steps it, so no reservation expires
// before the test means it to.
func TestHandoffAndExpiry(t *testing.T) {
	ctx := t.Context()
	l := newLedger(t, ctx, 100*gi)
	rec := watchLedgers(t, ctx, l.ns)

	ds := l.write(func(s *dsv1.DiskScheduleSpec) {
		s.Replicas = map[string]dsv1.RequestedBytes{"r-base": dsv1.RequestedBytes(60 * gi)}
		s.Reservations = map[string]dsv1.DiskScheduleReservation{"vol-1": {Size: 40 * gi, Pod: l.ns + "/pod-1"}}
	})
	l.expectReplica(ds, "r-base", dsv1.RequestStateScheduled, 60*gi)
	if st := ds.Status.Reservations["vol-1"]; st.State != dsv1.ReservationStateScheduled || st.ScheduledSize != 40*gi || st.ExpiresAt == nil {
		t.Fatalf("reservation vol-1: %+v, want scheduled 40Gi with expiresAt", st)
	}
	l.expectScheduled(ds, 100*gi)

	// One update: the handoff replica, a competitor for the same bytes, and
	// the reservation naming its replica. The competitor sorts before
	// r-local, so only the handoff rule keeps it from taking the space.
	ds = l.write(func(s *dsv1.DiskScheduleSpec) {
		s.Replicas["r-local"] = dsv1.RequestedBytes(40 * gi)
		s.Replicas["r-competitor"] = dsv1.RequestedBytes(40 * gi)
		res := s.Reservations["vol-1"]
		res.Replica = "r-local"
		s.Reservations["vol-1"] = res
	})
	l.expectReplica(ds, "r-local", dsv1.RequestStateScheduled, 40*gi)
	l.expectReplica(ds, "r-base", dsv1.RequestStateScheduled, 60*gi)
	st := l.expectReplica(ds, "r-competitor", dsv1.RequestStateRejected, 0)
	if !strings.Contains(st.Message, "40Gi") || !strings.Contains(st.Message, "100Gi") {
		t.Errorf("r-competitor's rejection %q does not give the requested size and the limit", st.Message)
	}
	res := ds.Status.Reservations["vol-1"]
	if res.State != dsv1.ReservationStateFulfilled || res.ScheduledSize != 0 || res.Replica != "r-local" || res.ExpiresAt != nil {
		t.Errorf("reservation vol-1: %+v, want fulfilled by r-local with 0 and no expiresAt", res)
	}
	l.expectScheduled(ds, 100*gi)

	// Removing a spec key frees its space in the same status write.
	ds = l.write(func(s *dsv1.DiskScheduleSpec) { delete(s.Replicas, "r-base") })
	if _, found := ds.Status.Replicas["r-base"]; found {
		t.Errorf("the removed r-base is still in status: %+v", ds.Status.Replicas["r-base"])
	}
	l.expectScheduled(ds, 40*gi)

	// A reservation no replica takes over expires and frees its space.
	const timeout = 30 * time.Second
	l.setReservationTimeout(int(timeout / time.Second))
	written := l.clock.Now()
	ds = l.write(func(s *dsv1.DiskScheduleSpec) {
		s.Reservations["vol-2"] = dsv1.DiskScheduleReservation{Size: 20 * gi, Pod: l.ns + "/pod-2"}
	})
	res = ds.Status.Reservations["vol-2"]
	if res.State != dsv1.ReservationStateScheduled || res.ScheduledSize != 20*gi || res.ExpiresAt == nil || !res.ExpiresAt.Time.Equal(written.Add(timeout)) {
		t.Fatalf("reservation vol-2: %+v, want scheduled 20Gi expiring at %s (the timeout setting after its decision)", res, written.Add(timeout))
	}
	l.expectScheduled(ds, 60*gi)
	// A second before its expiry, a decision keeps it.
	l.clock.Step(timeout - time.Second)
	ds = l.write(func(s *dsv1.DiskScheduleSpec) { s.Replicas["r-tick"] = dsv1.RequestedBytes(gi) })
	if res := ds.Status.Reservations["vol-2"]; res.State != dsv1.ReservationStateScheduled || res.ScheduledSize != 20*gi {
		t.Fatalf("reservation vol-2 a second before its expiry: %+v, want still scheduled", res)
	}
	ds = l.write(func(s *dsv1.DiskScheduleSpec) { delete(s.Replicas, "r-tick") })
	l.expectScheduled(ds, 60*gi)
	// At its expiry, the controller's next pass (an update of the ledger's
	// metadata wakes it) releases it.
	l.clock.Step(time.Second)
	l.touch()
	ds = l.waitFor("reservation vol-2 expires", func(ds *dsv1.DiskSchedule) bool {
		return ds.Status.Reservations["vol-2"].State == dsv1.ReservationStateExpired
	})
	res = ds.Status.Reservations["vol-2"]
	if res.ScheduledSize != 0 || res.ExpiresAt != nil || res.Message == "" {
		t.Errorf("expired reservation vol-2: %+v, want 0 bytes, no expiresAt and a message", res)
	}
	if ds.Status.Reservations["vol-1"].State != dsv1.ReservationStateFulfilled {
		t.Errorf("the fulfilled reservation vol-1 changed: %+v", ds.Status.Reservations["vol-1"])
	}
	l.expectReplica(ds, "r-local", dsv1.RequestStateScheduled, 40*gi)
	l.expectScheduled(ds, 40*gi)
	rec.report(t)
}

// TestDecisionsAreFinal checks that a request rejected on a full disk stays
// rejected when space is freed later (a decision on a key at a size is
// final), that removing a key frees its space, and that the same key asked
// again at a new size is a new request.
func TestDecisionsAreFinal(t *testing.T) {
	ctx := t.Context()
	l := newLedger(t, ctx, 100*gi)
	rec := watchLedgers(t, ctx, l.ns)

	ds := l.write(func(s *dsv1.DiskScheduleSpec) {
		s.Replicas = map[string]dsv1.RequestedBytes{"r-1": dsv1.RequestedBytes(60 * gi), "r-2": dsv1.RequestedBytes(40 * gi)}
	})
	l.expectReplica(ds, "r-1", dsv1.RequestStateScheduled, 60*gi)
	l.expectReplica(ds, "r-2", dsv1.RequestStateScheduled, 40*gi)
	l.expectScheduled(ds, 100*gi)

	ds = l.write(func(s *dsv1.DiskScheduleSpec) { s.Replicas["r-3"] = dsv1.RequestedBytes(10 * gi) })
	st := l.expectReplica(ds, "r-3", dsv1.RequestStateRejected, 0)
	if !strings.Contains(st.Message, "10Gi") || !strings.Contains(st.Message, "100Gi") {
		t.Errorf("r-3's rejection %q does not give the requested size and the limit", st.Message)
	}
	l.expectScheduled(ds, 100*gi)

	ds = l.write(func(s *dsv1.DiskScheduleSpec) { delete(s.Replicas, "r-2") })
	if _, found := ds.Status.Replicas["r-2"]; found {
		t.Errorf("the removed r-2 is still in status: %+v", ds.Status.Replicas["r-2"])
	}
	l.expectReplica(ds, "r-3", dsv1.RequestStateRejected, 0)
	l.expectScheduled(ds, 60*gi)

	// A later decision with free space grants a new request, and still
	// leaves r-3 rejected.
	ds = l.write(func(s *dsv1.DiskScheduleSpec) { s.Replicas["r-4"] = dsv1.RequestedBytes(5 * gi) })
	l.expectReplica(ds, "r-4", dsv1.RequestStateScheduled, 5*gi)
	l.expectReplica(ds, "r-3", dsv1.RequestStateRejected, 0)
	l.expectScheduled(ds, 65*gi)

	// Asking again at another size is a new request, decided again.
	ds = l.write(func(s *dsv1.DiskScheduleSpec) { s.Replicas["r-3"] = dsv1.RequestedBytes(11 * gi) })
	l.expectReplica(ds, "r-3", dsv1.RequestStateScheduled, 11*gi)
	l.expectScheduled(ds, 76*gi)
	rec.report(t)
}

// ledgerUnderTest is one disk's DiskSchedule with a manager deciding it.
type ledgerUnderTest struct {
	t    *testing.T
	ctx  context.Context
	ns   string
	uuid string
	// clock is the manager's clock: it stands still until the test steps it.
	clock *clocktesting.FakeClock
}

// newLedger starts a manager on a fake clock in a new namespace, creates a
// node with one disk of size bytes, and waits until the disk's ledger is
// Ready.
func newLedger(t *testing.T, ctx context.Context, size int64) *ledgerUnderTest {
	t.Helper()
	ns := newNamespace(t)
	// Whole seconds, as a ledger's expiresAt holds them.
	clk := clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
	startManagers(t, ns, 1, clk)
	l := &ledgerUnderTest{t: t, ctx: ctx, ns: ns, uuid: ns + "-uuid-0", clock: clk}
	f := testenv.NodeFixture{Name: ns + "-node", Disks: map[string]testenv.Disk{"disk-0": {UUID: l.uuid, Size: size}}}
	if err := f.CreateNode(ctx, env.Client, ns); err != nil {
		t.Fatal(err)
	}
	l.waitFor(fmt.Sprintf("the ledger is Ready with limit %d", size), func(ds *dsv1.DiskSchedule) bool {
		return meta.IsStatusConditionTrue(ds.Status.Conditions, dsv1.DiskScheduleConditionReady) && ds.Status.StorageLimit == size
	})
	return l
}

// write changes the ledger's spec in one update (retried on conflict) and
// returns the ledger once it has decided the generation that update produced.
func (l *ledgerUnderTest) write(mutate func(*dsv1.DiskScheduleSpec)) *dsv1.DiskSchedule {
	l.t.Helper()
	var generation int64
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ds := &dsv1.DiskSchedule{}
		if err := env.Client.Get(l.ctx, client.ObjectKey{Namespace: l.ns, Name: l.uuid}, ds); err != nil {
			return err
		}
		mutate(&ds.Spec)
		if err := env.Client.Update(l.ctx, ds); err != nil {
			return err
		}
		generation = ds.Generation
		return nil
	})
	if err != nil {
		l.t.Fatalf("writing the spec of DiskSchedule %s: %v", l.uuid, err)
	}
	return l.waitFor(fmt.Sprintf("generation %d is decided", generation), func(ds *dsv1.DiskSchedule) bool {
		return ds.Status.ObservedGeneration >= generation
	})
}

// touch updates the ledger's metadata, not its spec: its controller
// decides it again, at its clock's time.
func (l *ledgerUnderTest) touch() {
	l.t.Helper()
	ds := &dsv1.DiskSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: l.ns, Name: l.uuid}}
	patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"annotations":{"test.diskschedule/touched":%q}}}`, l.clock.Now().Format(time.RFC3339))))
	if err := env.Client.Patch(l.ctx, ds, patch); err != nil {
		l.t.Fatalf("updating the metadata of DiskSchedule %s: %v", l.uuid, err)
	}
}

// waitFor polls the ledger until done accepts it and returns it.
func (l *ledgerUnderTest) waitFor(what string, done func(*dsv1.DiskSchedule) bool) *dsv1.DiskSchedule {
	l.t.Helper()
	return testenv.WaitLedger(l.t, l.ctx, env.Client, l.ns, l.uuid, ledgerTimeout, what, done)
}

// expectReplica checks the decision on a replica request and returns it.
func (l *ledgerUnderTest) expectReplica(ds *dsv1.DiskSchedule, name string, state dsv1.RequestState, scheduled int64) dsv1.RequestStatus {
	l.t.Helper()
	st, ok := ds.Status.Replicas[name]
	if !ok || st.State != state || st.ScheduledSize != scheduled || st.RequestedSize != int64(ds.Spec.Replicas[name]) {
		l.t.Errorf("replica %s requesting %d: decision %+v (found %v), want %s with %d scheduled",
			name, ds.Spec.Replicas[name], st, ok, state, scheduled)
	}
	return st
}

// expectScheduled checks storageScheduled and that it stays within the limit.
func (l *ledgerUnderTest) expectScheduled(ds *dsv1.DiskSchedule, want int64) {
	l.t.Helper()
	if ds.Status.StorageScheduled != want || ds.Status.StorageScheduled > ds.Status.StorageLimit {
		l.t.Errorf("storageScheduled %d of limit %d, want %d", ds.Status.StorageScheduled, ds.Status.StorageLimit, want)
	}
}

// setReservationTimeout writes scheduler-extender-node-reservation-timeout
// into the ConfigMap diskschedule-config and waits until the manager has
// applied it (its SettingsApplied Event says so).
func (l *ledgerUnderTest) setReservationTimeout(seconds int) {
	l.t.Helper()
	setConfig(l.t, l.ctx, l.ns, map[string]string{settings.SchedulerExtenderNodeReservationTimeout: strconv.Itoa(seconds)})
	want := config.DefaultExtender()
	want.NodeReservationTimeout = time.Duration(seconds) * time.Second
	waitSettingsApplied(l.t, l.ctx, l.ns, want)
}
