package gate_test

import (
	"context"
	"flag"
	"fmt"
	"sort"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/controller/diskschedule"
	"github.com/longhorn/diskschedule/test/framework/testenv"
	"github.com/longhorn/diskschedule/test/framework/testenv/sandboxtest"
	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
)

// longhornRaces is how many races TestLonghornRace runs each way; the
// figures in docs/benchmarks.md come from -longhorn-races=5.
var longhornRaces = flag.Int("longhorn-races", 2, "races TestLonghornRace runs with the gate and without it")

// TestLonghornRace: longhorn-manager v1.12.0's own volume, replica and
// engine controllers (one longhorn-manager per node, each with its own
// datastore, work queues and backoff) place 32 volumes of one 100Gi replica
// (data locality disabled, as Longhorn's defaults) created at once on 4 ×
// 400Gi disks: twice what fits. Without the gate Longhorn's schedulers,
// each reading its own stale view of the disks, overfill a disk in at least
// one race (Longhorn as it is today); with the gate no disk ever holds more
// than its limit, every volume ends placed or told by Longhorn that it
// cannot be (Scheduled=False), every slot that fits is used, and the ledgers
// settle on what is persisted. The stall of each volume the gate refused
// (from its first refusal until it was placed or told Scheduled=False) is
// logged, p50 and max.
func TestLonghornRace(t *testing.T) {
	for _, withGate := range []bool{false, true} {
		name := "without the gate"
		if withGate {
			name = "with the gate"
		}
		t.Run(name, func(t *testing.T) {
			overfilled := 0
			var stalls []time.Duration
			for i := range *longhornRaces {
				r := longhornRace(t, withGate, i)
				if len(r.over()) > 0 {
					overfilled++
				}
				stalls = append(stalls, r.stalls...)
			}
			p50, worst := percentiles(stalls)
			t.Logf("%s: %d of %d races overfilled a disk; %d volumes refused by the gate, stalled p50 %s, max %s",
				name, overfilled, *longhornRaces, len(stalls), p50, worst)
			if !withGate && overfilled == 0 {
				t.Errorf("without the gate no race overfilled a disk: the workload does not race")
			}
		})
	}
}

// longhornResult is one race's outcome.
type longhornResult struct {
	*run
	// stalls are, per volume the gate refused, the time from its first
	// refusal until it was placed or Longhorn reported Scheduled=False.
	stalls []time.Duration
}

// longhornRace runs one race in a sandbox of its own.
func longhornRace(t *testing.T, withGate bool, i int) longhornResult {
	t.Helper()
	const volumes, size = 32, replicaSize
	sb := sandboxtest.Start(t, sandboxtest.Options{
		Sandbox:  sandbox.Options{Topology: topology(), NoGate: !withGate, Managers: []sandbox.ManagerHook{withGrace}},
		KeepLogs: true,
	})
	defer func() {
		if err := sb.Stop(); err != nil {
			t.Errorf("stopping the sandbox: %v", err)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := sandboxtest.WatchingClient(t, sb)
	limits, names := disks(ctx, t, c, len(topology().Nodes))
	r := longhornResult{run: &run{limits: limits, peak: map[string]int64{}, names: names}}
	stop, err := watchReplicas(ctx, t, c, r.run)
	if err != nil {
		t.Fatal(err)
	}
	stopRefusals, err := sandboxtest.WatchRefusals(ctx, c)
	if err != nil {
		t.Fatal(err)
	}

	var vols []string
	for v := range volumes {
		vols = append(vols, fmt.Sprintf("race-%d-%02d", i, v))
	}
	created := sandboxtest.CreateVolumes(ctx, t, c, vols, testenv.VolumeFixture{Size: size, Replicas: 1})
	resolved, placed := sandboxtest.WaitDecided(ctx, t, c, created, 4*time.Minute)
	stop()
	first := stopRefusals()
	waitQuiet(ctx, t, c, r.run)
	r.placed = placed
	for vol, at := range first {
		r.stalls = append(r.stalls, resolved[vol].Sub(at))
	}
	r.denied = len(first)
	pct, disk := r.fullest()
	t.Logf("race %d %s: %d placed, %d volumes refused by the gate, fullest disk %s at %.0f%% of its limit, over: %v",
		i, map[bool]string{true: "with the gate", false: "without the gate"}[withGate], r.placed, r.denied, disk, pct, r.over())
	if withGate {
		if over := r.over(); len(over) > 0 {
			t.Errorf("with the gate, persisted bytes went over a disk's limit: %v", over)
			dumpLedgersAndReplicas(t, sb.Client())
		}
		if r.placed != 16 {
			t.Errorf("%d volumes placed, want 16: 4 disks of 400Gi hold 4 × 100Gi each", r.placed)
		}
	}
	settle(t, sb.Client())
	return r
}

// percentiles returns the median and the largest of ds (zero when empty).
func percentiles(ds []time.Duration) (p50, worst time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2].Round(10 * time.Millisecond), s[len(s)-1].Round(10 * time.Millisecond)
}

// TestReservationYieldsToLonghornsControllers: a reservation held for a
// bound pod never starves Longhorn. Longhorn's scheduler cannot see a
// reservation and keeps choosing the disk that looks emptiest to it: here
// node-1's, where the ledger holds 500Gi of its 600Gi for a pod bound there
// whose best-effort volume Longhorn has not placed yet (it places a
// best-effort volume's replica once it is attached). Then 16 volumes of
// 100Gi are created at once, more than the other two disks hold (12), and
// longhorn-manager v1.12.0's own controllers place them. The reservation
// yields to the first Longhorn placement that fits what Longhorn itself
// counts on the disk (cut in the same status write, with an Event on its
// pod), so no volume is left more than 10 s neither placed nor told
// Scheduled=False, all 16 are placed (they fit Longhorn's own count), and
// no disk is ever over its limit.
func TestReservationYieldsToLonghornsControllers(t *testing.T) {
	const (
		volumes  = 16
		size     = 100 * gib
		reserved = 500 * gib
		bound    = 10 * time.Second
	)
	topo := &sandbox.Topology{}
	for i := 1; i <= 3; i++ {
		topo.Nodes = append(topo.Nodes, sandbox.Node{Name: fmt.Sprintf("node-%d", i), Disks: []sandbox.Disk{{Name: "disk-1", Size: 600 * gib}}})
	}
	sb := sandboxtest.Start(t, sandboxtest.Options{
		Sandbox:  sandbox.Options{Topology: topo, Managers: []sandbox.ManagerHook{withGrace}},
		KeepLogs: true,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := sandboxtest.WatchingClient(t, sb)

	// The pod's volume, best-effort, which Longhorn places only once it is
	// attached; the pod, bound to node-1; and the reservation the extender
	// wrote for it on node-1's disk, held by the ledger (rule 6).
	held := testenv.Volume(sandbox.Namespace, "held", testenv.VolumeFixture{Size: reserved, Replicas: 1, DataLocality: lhv1.DataLocalityBestEffort})
	if err := c.Create(ctx, held); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "held"},
		Spec:       corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
	}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	uuid := sandbox.DiskUUID("node-1", "disk-1")
	ds := &dsv1.DiskSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: sandbox.Namespace, Name: uuid}}
	patch := []byte(fmt.Sprintf(`{"spec":{"reservations":{"held":{"size":%d,"pod":"default/held"}}}}`, reserved))
	if err := c.Patch(ctx, ds, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, ctx, time.Minute, "the bound pod's reservation held on node-1's disk", func(ctx context.Context) (bool, string, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(ds), ds); err != nil {
			return false, "", err
		}
		st := ds.Status.Reservations["held"]
		return st.State == dsv1.ReservationStateScheduled && st.ExpiresAt == nil, fmt.Sprintf("%+v", st), nil
	})

	limits, names := disks(ctx, t, c, len(topo.Nodes))
	r := &run{limits: limits, peak: map[string]int64{}, names: names}
	stop, err := watchReplicas(ctx, t, c, r)
	if err != nil {
		t.Fatal(err)
	}
	var vols []string
	for v := range volumes {
		vols = append(vols, fmt.Sprintf("more-%02d", v))
	}
	created := sandboxtest.CreateVolumes(ctx, t, c, vols, testenv.VolumeFixture{Size: size, Replicas: 1})
	resolved, placed := sandboxtest.WaitDecided(ctx, t, c, created, 4*time.Minute)
	open := map[string]time.Duration{}
	for name, at := range resolved {
		open[name] = at.Sub(created[name])
	}
	stop()
	waitQuiet(ctx, t, c, r)

	var worst time.Duration
	var slowest string
	for name, d := range open {
		if d > worst {
			worst, slowest = d, name
		}
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(ds), ds); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d of %d volumes placed; the longest a volume was neither placed nor told Scheduled=False: %s (%s); node-1's reservation: %+v; over: %v",
		placed, volumes, worst.Round(10*time.Millisecond), slowest, ds.Status.Reservations["held"], r.over())
	if worst > bound {
		t.Errorf("volume %s was neither placed nor told Scheduled=False for %s, more than %s", slowest, worst.Round(10*time.Millisecond), bound)
	}
	if placed != volumes {
		t.Errorf("%d volumes placed, want all %d: they fit what Longhorn counts on the three disks", placed, volumes)
	}
	if over := r.over(); len(over) > 0 {
		t.Errorf("persisted bytes went over a disk's limit: %v", over)
	}
	events := &eventsv1.EventList{}
	if err := c.List(ctx, events, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	yielded := false
	for _, e := range events.Items {
		yielded = yielded || (e.Regarding.Name == "held" && e.Reason == diskschedule.ReasonReservationYielded)
	}
	if !yielded {
		t.Errorf("no %s Event on pod default/held", diskschedule.ReasonReservationYielded)
	}
	settle(t, sb.Client())
}
