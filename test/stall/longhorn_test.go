package stall_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/sandbox"
	"github.com/longhorn/diskschedule/internal/scenario"
	"github.com/longhorn/diskschedule/internal/testenv"
	"github.com/longhorn/diskschedule/internal/testenv/sandboxtest"
)

// The cases below run on longhorn-manager v1.12.0's own controllers and the
// simulated data plane (the sandbox's --longhorn-controllers): every write
// of a Longhorn object is Longhorn's, through the gate. A volume's stall
// there runs from the request (the claim's update, the disk's eviction) to
// what Longhorn reports done; the bounds are in
// docs/accounting-differences.md, "Stalls on Longhorn's own controllers".

// longhornStallBound bounds a stall that Longhorn's own watches end: each
// step of Longhorn's (the Node or claim change seen, the replica created
// and granted, started, rebuilt, the old one removed) is triggered by an
// informer event, so none waits for the 30 s resync; the bound is that
// resync, for a loaded machine.
const longhornStallBound = 30 * time.Second

// evictionBound bounds a disk eviction's stall by Longhorn's own periods:
// its node controller acts on a changed disk spec once its disk monitor
// collected the disk again (every 30 s: DiskMonitorSyncPeriod), its engine
// controller waits one tick of its purge wait (2 × EnginePollInterval,
// 10 s) before it rebuilds and sees the rebuilt replica in its next poll
// (5 s); 15 s more for a loaded machine.
const evictionBound = 60 * time.Second

// longhornEnv is a sandbox running Longhorn's own controllers, with a watch
// of every ledger's invariant.
type longhornEnv struct {
	c       client.WithWatch
	ledgers *scenario.LedgerWatch
	// logs is the sandbox's log directory.
	logs string
}

// startLonghorn starts a sandbox of three nodes with one 400Gi disk each
// on Longhorn's own controllers, and the ledger watch; at the end of the
// test no ledger broke its invariant and every ledger settled on what is
// persisted.
func startLonghorn(t *testing.T) *longhornEnv {
	t.Helper()
	topo := &sandbox.Topology{}
	for i := 1; i <= 3; i++ {
		topo.Nodes = append(topo.Nodes, sandbox.Node{Name: fmt.Sprintf("node-%d", i), Disks: []sandbox.Disk{{Name: "disk-1", Size: 400 * gib}}})
	}
	logs := t.TempDir()
	sb := sandboxtest.Start(t, sandboxtest.Options{Sandbox: sandbox.Options{Topology: topo, LonghornControllers: true, LogDir: logs}})
	cfg := sb.AdminConfig()
	cfg.QPS, cfg.Burst = 500, 1000
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: sb.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithCancel(context.Background())
	lw, err := scenario.WatchLedgers(wctx, c, sandbox.Namespace)
	if err != nil {
		wcancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		defer wcancel()
		if t.Failed() {
			testenv.LogTail(t, filepath.Join(logs, "longhorn-controllers.log"))
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		settle(ctx, t, c)
		_, versions, violations, err := lw.Stop(ctx)
		if err != nil {
			t.Errorf("the ledger watch: %v", err)
		}
		for _, v := range violations {
			t.Errorf("ledger invariant broken: %s", v)
		}
		t.Logf("%d ledger versions watched, %d broke the invariant", versions, len(violations))
	})
	return &longhornEnv{c: c, ledgers: lw, logs: logs}
}

// runPod runs a pod on a claim of size of the default class (one replica,
// best-effort data locality): sandboxtest.RunPod.
func (e *longhornEnv) runPod(ctx context.Context, t *testing.T, name, size string) (*corev1.PersistentVolumeClaim, string) {
	t.Helper()
	pvc, _, vol := sandboxtest.RunPod(ctx, t, e.c, name, size)
	return pvc, vol
}

// replicas returns the volume's replicas.
func (e *longhornEnv) replicas(ctx context.Context, t *testing.T, vol string) []lhv1.Replica {
	t.Helper()
	list := &lhv1.ReplicaList{}
	if err := e.c.List(ctx, list, client.InNamespace(sandbox.Namespace), client.MatchingLabels{"longhornvolume": vol}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// granted returns what disk's ledger grants replica (zero when it holds
// nothing for it).
func (e *longhornEnv) granted(ctx context.Context, disk, replica string) (int64, error) {
	if disk == "" {
		return 0, nil // not placed
	}
	ds := &dsv1.DiskSchedule{}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: disk}, ds); err != nil {
		return 0, err
	}
	st, ok := ds.Status.Replicas[replica]
	if !ok || st.State != dsv1.RequestStateScheduled {
		return 0, nil
	}
	return st.ScheduledSize, nil
}

// evict requests the eviction of node's disk at path, and stops scheduling
// to it, as an operator does on the Longhorn Node (evict false ends both).
func (e *longhornEnv) evict(ctx context.Context, t *testing.T, node, path string, evict bool) {
	t.Helper()
	n := &lhv1.Node{}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: node}, n); err != nil {
		t.Fatal(err)
	}
	for name, d := range n.Spec.Disks {
		if d.Path == path {
			d.AllowScheduling, d.EvictionRequested = !evict, evict
			n.Spec.Disks[name] = d
		}
	}
	if err := e.c.Update(ctx, n); err != nil {
		t.Fatal(err)
	}
}

// TestDiskEvictionStall: a disk's eviction requested on the Longhorn Node,
// as an operator does, and Longhorn's own node, eviction and volume
// controllers move the replica of a running volume to another disk: the
// new replica is placed by Longhorn's scheduler and granted by its disk's
// ledger, rebuilt through the instance manager's proxy, the evicted one
// removed and its grant released; the volume is stalled (its replica not
// yet moved) no longer than evictionBound. (Its best-effort data locality
// then asks for a local replica, which Longhorn cannot place on the
// evicted disk: that replica stays unplaced, as in a cluster.)
func TestDiskEvictionStall(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	t.Parallel()
	e := startLonghorn(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, vol := e.runPod(ctx, t, "evicted", "100Gi")
	before := e.replicas(ctx, t, vol)
	if len(before) != 1 || before[0].Spec.DiskID == "" {
		t.Fatalf("want one placed replica of %s, got %+v", vol, before)
	}
	old := before[0]

	start := time.Now()
	e.evict(ctx, t, old.Spec.NodeID, old.Spec.DiskPath, true)
	var moved lhv1.Replica
	testenv.Eventually(t, ctx, 2*evictionBound, "the replica moved off the evicted disk, granted there, the old one removed and released", func(ctx context.Context) (bool, string, error) {
		var state []string
		placed, oldGone := false, true
		for _, r := range e.replicas(ctx, t, vol) {
			g, err := e.granted(ctx, r.Spec.DiskID, r.Name)
			if err != nil {
				return false, "", err
			}
			state = append(state, fmt.Sprintf("%s on %s/%s %s, granted %d", r.Name, r.Spec.NodeID, r.Spec.DiskID, r.Status.CurrentState, g))
			oldGone = oldGone && r.Name != old.Name
			if r.Name != old.Name && r.Spec.DiskID != "" && r.Spec.DiskID != old.Spec.DiskID && r.Status.CurrentState == lhv1.InstanceStateRunning && g == 100*gib {
				placed, moved = true, r
			}
		}
		released, err := e.granted(ctx, old.Spec.DiskID, old.Name)
		if err != nil {
			return false, "", err
		}
		return placed && oldGone && released == 0, strings.Join(state, "; ") + fmt.Sprintf("; old grant %d", released), nil
	})
	stall := time.Since(start)
	t.Logf("disk eviction: replica %s on %s moved to %s on %s in %s (bound %s)", old.Name, old.Spec.NodeID, moved.Name, moved.Spec.NodeID, stall.Round(10*time.Millisecond), evictionBound)
	if stall > evictionBound {
		t.Errorf("the evicted volume was stalled %s, over its bound %s", stall, evictionBound)
	}
	// The operator ends the disk's maintenance: its ledger is Ready again,
	// and what Longhorn does next (the local replica its data locality
	// asked for) settles like the rest.
	e.evict(ctx, t, old.Spec.NodeID, old.Spec.DiskPath, false)
}

// TestExpansionStall: a running volume's claim expanded through Longhorn's
// API (as Longhorn's CSI driver does: VolumeManager.Expand, the gate
// deciding the volume's new size, the engine expanded through the instance
// manager's proxy): the claim gets its capacity and the replica its grant
// within longhornStallBound. An expansion no disk can hold is refused at
// once by Longhorn's own claim validator (its physical-space check), before
// any Longhorn object changes: the volume keeps its size and its grant.
func TestExpansionStall(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	t.Parallel()
	e := startLonghorn(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	pvc, vol := e.runPod(ctx, t, "grown", "100Gi")

	start := time.Now()
	if _, err := sandboxtest.SetClaimRequest(ctx, e.c, pvc, "200Gi"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, ctx, 2*longhornStallBound, "the claim at 200Gi and its replica granted 200Gi", func(ctx context.Context) (bool, string, error) {
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
			return false, "", err
		}
		capacity := pvc.Status.Capacity[corev1.ResourceStorage]
		rs := e.replicas(ctx, t, vol)
		if len(rs) != 1 {
			return false, fmt.Sprintf("%d replicas", len(rs)), nil
		}
		g, err := e.granted(ctx, rs[0].Spec.DiskID, rs[0].Name)
		if err != nil {
			return false, "", err
		}
		return capacity.Value() == 200*gib && g == 200*gib, fmt.Sprintf("claim %s, replica granted %d", capacity.String(), g), nil
	})
	stall := time.Since(start)
	t.Logf("expansion that fits: 100Gi to 200Gi in %s (bound %s)", stall.Round(10*time.Millisecond), longhornStallBound)
	if stall > longhornStallBound {
		t.Errorf("the expanded volume was stalled %s, over its bound %s", stall, longhornStallBound)
	}

	took, err := sandboxtest.SetClaimRequest(ctx, e.c, pvc, "500Gi")
	if err == nil || !strings.Contains(err.Error(), "does not have sufficient physical space") {
		t.Fatalf("expanding the claim to 500Gi on a 400Gi disk: got %v, want Longhorn's validator's refusal for physical space", err)
	}
	t.Logf("expansion that does not fit: refused in %s by Longhorn's claim validator: %v", took.Round(time.Millisecond), err)
	v := &lhv1.Volume{}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: vol}, v); err != nil {
		t.Fatal(err)
	}
	if v.Spec.Size != 200*gib {
		t.Errorf("volume %s size %d after the refused expansion, want 200Gi", vol, v.Spec.Size)
	}
}
