package diskschedule_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/manager"
	"github.com/longhorn/diskschedule/test/framework/managertest"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

// TestReservationHeldWhileItsPodIsBound checks DESIGN rule 6 against a real
// API server, with the ledger's clock faked: a reservation whose pod is
// bound to the disk's node outlives its timeout; deleting the pod, binding
// it to another node, or a replica of its volume persisted on another disk
// of the node releases it; a reservation whose pod is not bound expires at
// its expiresAt.
func TestReservationHeldWhileItsPodIsBound(t *testing.T) {
	ctx := t.Context()
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l := newLedgerWith(t, ctx, 200*gi, manager.Options{Clock: clk}, "disk-1")
	node := l.ns + "-node"
	timeout := 5 * time.Second // scheduler-extender-node-reservation-timeout's default

	// poke makes the ledger decide again, as any spec change does, and
	// returns it once decided: with a fake clock nothing else wakes it.
	pokes := 0
	poke := func() *dsv1.DiskSchedule {
		t.Helper()
		pokes++
		return l.write(func(s *dsv1.DiskScheduleSpec) {
			if s.Replicas == nil {
				s.Replicas = map[string]dsv1.RequestedBytes{}
			}
			s.Replicas[fmt.Sprintf("r-poke-%d", pokes)] = 1
		})
	}
	reserve := func(volume, pod string) *dsv1.DiskSchedule {
		t.Helper()
		return l.write(func(s *dsv1.DiskScheduleSpec) {
			if s.Reservations == nil {
				s.Reservations = map[string]dsv1.DiskScheduleReservation{}
			}
			s.Reservations[volume] = dsv1.DiskScheduleReservation{Size: 40 * gi, Pod: l.ns + "/" + pod}
		})
	}
	heldFor := func(volume string) func(*dsv1.DiskSchedule) bool {
		return func(ds *dsv1.DiskSchedule) bool {
			st := ds.Status.Reservations[volume]
			return st.State == dsv1.ReservationStateScheduled && st.ScheduledSize == 40*gi && st.ExpiresAt == nil
		}
	}
	endedWith := func(volume string, state dsv1.ReservationState, msg string) func(*dsv1.DiskSchedule) bool {
		return func(ds *dsv1.DiskSchedule) bool {
			st := ds.Status.Reservations[volume]
			return st.State == state && st.ScheduledSize == 0 && st.ExpiresAt == nil && strings.Contains(st.Message, msg)
		}
	}

	// A pod not bound yet: its reservation is granted until now+timeout.
	createPod(t, ctx, l.ns, "held")
	ds := reserve("vol-held", "held")
	if st := ds.Status.Reservations["vol-held"]; st.State != dsv1.ReservationStateScheduled || st.ExpiresAt == nil ||
		!st.ExpiresAt.Time.Equal(clk.Now().Add(timeout)) {
		t.Fatalf("reservation of an unbound pod = %+v, want scheduled until %v", st, clk.Now().Add(timeout))
	}
	// Bound to the disk's node: held, with no expiry.
	bindPod(t, ctx, l.ns, "held", node)
	l.waitFor("the bound pod's reservation is held", heldFor("vol-held"))
	// An hour later (past any timeout) and decided again: still held.
	clk.SetTime(clk.Now().Add(time.Hour))
	ds = poke()
	if !heldFor("vol-held")(ds) {
		t.Errorf("an hour later the bound pod's reservation is %+v, want held", ds.Status.Reservations["vol-held"])
	}
	l.expectScheduled(ds, 40*gi+int64(pokes))
	// Deleting the pod releases it.
	if err := env.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: l.ns, Name: "held"}},
		client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	l.waitFor("the deleted pod's reservation is released", endedWith("vol-held", dsv1.ReservationStateExpired, "pod "+l.ns+"/held deleted"))

	// A pod bound to another node releases its reservation here.
	createPod(t, ctx, l.ns, "moved")
	reserve("vol-moved", "moved")
	bindPod(t, ctx, l.ns, "moved", "other-node")
	l.waitFor("the reservation of a pod bound elsewhere is released", endedWith("vol-moved", dsv1.ReservationStateExpired,
		fmt.Sprintf("pod %s/moved bound to other-node, not %s", l.ns, node)))

	// A replica of the volume persisted on another disk of the node
	// releases the reservation of a bound pod.
	createPod(t, ctx, l.ns, "local")
	reserve("vol-local", "local")
	bindPod(t, ctx, l.ns, "local", node)
	l.waitFor("the bound pod's reservation is held", heldFor("vol-local"))
	r := testenv.Replica(l.ns, "vol-local-r-1", testenv.ReplicaFixture{Volume: "vol-local", Size: 40 * gi,
		NodeID: node, DiskName: "disk-1", DiskID: l.ns + "-uuid-1"})
	if err := testenv.CreateLonghorn(ctx, env.Client, r); err != nil {
		t.Fatal(err)
	}
	ds = l.waitFor("the reservation is released by the replica on the node", endedWith("vol-local", dsv1.ReservationStateFulfilled,
		"replica vol-local-r-1 of the volume is persisted on node "+node))
	if got := ds.Status.Reservations["vol-local"].Replica; got != "vol-local-r-1" {
		t.Errorf("fulfilled reservation names replica %q, want vol-local-r-1", got)
	}

	// A pod that stays unbound: its reservation expires at expiresAt, not
	// a moment before.
	createPod(t, ctx, l.ns, "waiting")
	ds = reserve("vol-waiting", "waiting")
	expires := ds.Status.Reservations["vol-waiting"].ExpiresAt
	if expires == nil {
		t.Fatalf("reservation of an unbound pod = %+v, want an expiresAt", ds.Status.Reservations["vol-waiting"])
	}
	clk.SetTime(expires.Time.Add(-time.Millisecond))
	ds = poke()
	if st := ds.Status.Reservations["vol-waiting"]; st.State != dsv1.ReservationStateScheduled {
		t.Errorf("just before expiresAt the reservation is %+v, want scheduled", st)
	}
	clk.SetTime(expires.Time)
	poke()
	ds = l.waitFor("the unbound pod's reservation expires", endedWith("vol-waiting", dsv1.ReservationStateExpired, "expired at"))
	l.expectScheduled(ds, int64(pokes))
	if !meta.IsStatusConditionTrue(ds.Status.Conditions, dsv1.DiskScheduleConditionReady) {
		t.Errorf("ledger not Ready: %+v", ds.Status.Conditions)
	}
}

// newLedgerWith is newLedger with the manager's options (its namespace,
// workers and grace are set here) and extra empty disks on the node.
func newLedgerWith(t *testing.T, ctx context.Context, size int64, opts manager.Options, extraDisks ...string) *ledgerUnderTest {
	t.Helper()
	ns := newNamespace(t)
	opts.Namespace, opts.LedgerWorkers, opts.GateGrace = ns, 4, noRelease
	m, err := managertest.Start(env, env.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Stop() })
	l := &ledgerUnderTest{t: t, ctx: ctx, ns: ns, uuid: ns + "-uuid-0"}
	disks := map[string]testenv.Disk{"disk-0": {UUID: l.uuid, Size: size}}
	for i, name := range extraDisks {
		disks[name] = testenv.Disk{UUID: fmt.Sprintf("%s-uuid-%d", ns, i+1), Size: size}
	}
	f := testenv.NodeFixture{Name: ns + "-node", Disks: disks}
	if err := f.CreateNode(ctx, env.Client, ns); err != nil {
		t.Fatal(err)
	}
	l.waitFor(fmt.Sprintf("the ledger is Ready with limit %d", size), func(ds *dsv1.DiskSchedule) bool {
		return meta.IsStatusConditionTrue(ds.Status.Conditions, dsv1.DiskScheduleConditionReady) && ds.Status.StorageLimit == size
	})
	return l
}

// createPod creates an unbound pod.
func createPod(t *testing.T, ctx context.Context, namespace, name string) {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatalf("creating pod %s: %v", name, err)
	}
}

// bindPod binds a pod to node, as kube-scheduler does.
func bindPod(t *testing.T, ctx context.Context, namespace, name, node string) {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Target: corev1.ObjectReference{Kind: "Node", Name: node}}
	if err := env.Client.SubResource("binding").Create(ctx, p, binding); err != nil {
		t.Fatalf("binding pod %s to %s: %v", name, node, err)
	}
}
