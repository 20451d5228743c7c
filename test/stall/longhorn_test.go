package stall_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/test/framework/scenario"
	"github.com/longhorn/diskschedule/test/framework/testenv"
	"github.com/longhorn/diskschedule/test/framework/testenv/sandboxtest"
	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
	"github.com/longhorn/diskschedule/test/infrastructure/simcluster"
)

// The cases below run on longhorn-manager v1.12.0's own controllers and the
// simulated data plane: every write
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

// A node going down, with the timings of Kubernetes the sandbox keeps
// (kube-controller-manager's and the kubelet's defaults) and the one
// Longhorn setting the test changes, as an operator would.
const (
	// nodeNotReadyWithin bounds when kube-controller-manager's node
	// lifecycle controller marks a node that stopped renewing its Lease
	// NotReady: its --node-monitor-grace-period (50 s) after the last
	// renewal it saw, which is up to one renewal interval (10 s, a quarter
	// of the kubelet's 40 s lease) before the node went down, plus one
	// --node-monitor-period (5 s) for it to look.
	nodeNotReadyWithin = 50*time.Second + 10*time.Second + 5*time.Second
	// replenishmentWait is Longhorn's replica-replenishment-wait-interval
	// as the test sets it: how long Longhorn waits, from the volume's
	// degradation, for a failed replica to come back before it builds a new
	// one elsewhere. Its default (600 s) makes a test of ten minutes; 90 s
	// is longer than nodeNotReadyWithin, so that when the wait ends Longhorn
	// knows the node is down (its failed replica there is no longer
	// reusable), as with the default.
	replenishmentWait = 90 * time.Second
	// nodeDownBound bounds the stall of a volume whose replica's node went
	// down, by Longhorn's own periods: its engine finds the replica in
	// error at its next poll (EnginePollInterval, 5 s) and its volume
	// controller marks it failed and the volume degraded at once; the new
	// replica is created replenishmentWait after the degradation (plus the
	// second Longhorn adds for clock skew), placed, granted and started
	// within seconds; its engine rebuilds it after one tick of its purge
	// wait (2 × EnginePollInterval, 10 s) and sees it RW in its next poll
	// (5 s); 15 s more for a loaded machine.
	nodeDownBound = 5*time.Second + replenishmentWait + time.Second + 10*time.Second + 5*time.Second + 15*time.Second
)

// longhornEnv is a sandbox running Longhorn's own controllers, with a watch
// of every ledger's invariant.
type longhornEnv struct {
	sb      *sandbox.Sandbox
	c       client.WithWatch
	ledgers *scenario.LedgerWatch
	// logs is the sandbox's log directory.
	logs string
	// down are the nodes the test took down (stopNode): their ledgers
	// settle not Ready.
	down []string
}

// startLonghorn starts a sandbox of three nodes with one 400Gi disk each
// on Longhorn's own controllers, and the ledger watch; at the end of the
// test no ledger broke its invariant and every ledger settled on what is
// persisted (not Ready on a node the test took down, Ready elsewhere).
// Each of opts changes the sandbox's options (e.g. Extender).
func startLonghorn(t *testing.T, opts ...func(*sandbox.Options)) *longhornEnv {
	t.Helper()
	logs := t.TempDir()
	so := sandbox.Options{Topology: sandboxtest.Nodes(3, 400*gib), LogDir: logs}
	for _, o := range opts {
		o(&so)
	}
	sb := sandboxtest.Start(t, sandboxtest.Options{Sandbox: so, TailLogs: []string{"longhorn-controllers.log"}})
	c := sandboxtest.WatchingClient(t, sb)
	wctx, wcancel := context.WithCancel(context.Background())
	lw, err := scenario.WatchLedgers(wctx, c, sandbox.Namespace)
	if err != nil {
		wcancel()
		t.Fatal(err)
	}
	e := &longhornEnv{sb: sb, c: c, ledgers: lw}
	t.Cleanup(func() {
		defer wcancel()
		if t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		settle(ctx, t, c, e.down...)
		_, versions, violations, err := lw.Stop(ctx)
		if err != nil {
			t.Errorf("the ledger watch: %v", err)
		}
		for _, v := range violations {
			t.Errorf("ledger invariant broken: %s", v)
		}
		t.Logf("%d ledger versions watched, %d broke the invariant", versions, len(violations))
	})
	e.logs = logs
	return e
}

// stopNode takes node down as a node dies (sandbox.StopNode: its kubelet,
// instance manager and longhorn-manager stop).
func (e *longhornEnv) stopNode(ctx context.Context, t *testing.T, node string) {
	t.Helper()
	if err := e.sb.StopNode(ctx, node); err != nil {
		t.Fatal(err)
	}
	e.down = append(e.down, node)
}

// setLonghornSetting sets one of Longhorn's Settings, as an operator does
// (through the API, past Longhorn's setting validator).
func (e *longhornEnv) setLonghornSetting(ctx context.Context, t *testing.T, name, value string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s := &lhv1.Setting{}
		err := e.c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: name}, s)
		if apierrors.IsNotFound(err) {
			return e.c.Create(ctx, &lhv1.Setting{ObjectMeta: metav1.ObjectMeta{Namespace: sandbox.Namespace, Name: name}, Value: value})
		}
		if err != nil {
			return err
		}
		s.Value = value
		return e.c.Update(ctx, s)
	})
	if err != nil {
		t.Fatalf("setting Longhorn's %s to %s: %v", name, value, err)
	}
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
	return e.grantedOf(ctx, disk, ledger.Replica, replica)
}

// grantedOf returns what disk's ledger grants the request of kind named
// name (zero when it holds nothing for it, or disk is "": not placed).
func (e *longhornEnv) grantedOf(ctx context.Context, disk string, kind ledger.Kind, name string) (int64, error) {
	if disk == "" {
		return 0, nil
	}
	ds := &dsv1.DiskSchedule{}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: disk}, ds); err != nil {
		return 0, err
	}
	st, ok := (*ledger.Decisions(&ds.Status, kind))[name]
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

// takenOver reports whether a replica of a node that went down is owned by
// another node's longhorn-manager (Longhorn moves the ownership of what a
// down node owned) and reported not running: Longhorn reports a failed
// replica whose instance it wants stopped as stopped, although its
// instance manager was never reached.
func takenOver(r *lhv1.Replica, down string) bool {
	return r.Status.OwnerID != "" && r.Status.OwnerID != down && r.Status.CurrentState != lhv1.InstanceStateRunning
}

// timeline records when each milestone of a case was first seen, from its
// start.
type timeline struct {
	start time.Time
	at    map[string]time.Duration
	order []string
}

func newTimeline(start time.Time) *timeline {
	return &timeline{start: start, at: map[string]time.Duration{}}
}

// see records name now, the first time seen is true.
func (tl *timeline) see(name string, seen bool) {
	if _, ok := tl.at[name]; ok || !seen {
		return
	}
	tl.at[name] = time.Since(tl.start)
	tl.order = append(tl.order, name)
}

// before reports whether a was seen, and b not seen or seen later.
func (tl *timeline) before(a, b string) bool {
	ta, ok := tl.at[a]
	if !ok {
		return false
	}
	tb, ok := tl.at[b]
	return !ok || ta <= tb
}

// seen reports whether name was seen.
func (tl *timeline) seen(name string) bool {
	_, ok := tl.at[name]
	return ok
}

func (tl *timeline) String() string {
	var b strings.Builder
	for _, name := range tl.order {
		fmt.Fprintf(&b, "\n  %7.1fs %s", tl.at[name].Seconds(), name)
	}
	return b.String()
}

// Milestones of a node going down.
const (
	seenReplicaFailed    = "the engine found the replica in error: Longhorn marked it failed"
	seenDegraded         = "the volume degraded"
	seenReused           = "Longhorn reused the failed replica (its node still looked up)"
	seenFailedAgain      = "the reused replica failed again (its rebuild could not reach it)"
	seenKubeNotReady     = "kube-controller-manager marked the Kubernetes Node NotReady"
	seenLonghornDown     = "Longhorn's node controller marked the Longhorn Node down (KubernetesNodeNotReady)"
	seenIMNotRunning     = "Longhorn's instance manager controller marked the node's instance manager not running"
	seenReplicaTakenOver = "another node's replica controller took the failed replica over: not running"
	seenReplacement      = "Longhorn created a new replica"
	seenPlaced           = "Longhorn's scheduler placed it on another node's disk"
	seenGranted          = "the disk's ledger granted it"
	seenReplacementRW    = "it was rebuilt: RW in the engine"
	seenVolumeHealthy    = "the volume healthy again"
)

const (
	// twoReplicasClass is the test's StorageClass: two replicas, no data
	// locality.
	twoReplicasClass = "two-replicas"
	// replenishmentWaitSetting is the name of Longhorn's Setting.
	replenishmentWaitSetting = "replica-replenishment-wait-interval"
)

// TestNodeDownRebuildStall: a node holding a replica of a running volume
// of two replicas goes down as a node dies (its kubelet, instance manager
// and longhorn-manager stop: sandbox.StopNode), and Longhorn's own
// controllers on the other nodes rebuild the replica elsewhere. Its engine
// finds the replica in error and its volume controller marks it failed and
// the volume degraded; the node still looks up to Longhorn, so its volume
// controller first reuses the failed replica, whose rebuild cannot reach
// it and fails it again; kube-controller-manager marks the node NotReady,
// Longhorn's node controller the Longhorn Node down, its instance manager
// controller the node's instance manager not running, and another node's
// replica controller takes the failed replica over; once
// replica-replenishment-wait-interval passed since the degradation, its
// volume controller creates a new replica, its scheduler places it on
// another node's disk, the gate has the disk's ledger grant it, its engine
// rebuilds it, and the volume is healthy again within nodeDownBound.
// Longhorn keeps the failed replica (until the volume's
// staleReplicaTimeout, two days), and its ledger entry stays with it.
func TestNodeDownRebuildStall(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	t.Parallel()
	e := startLonghorn(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	e.setLonghornSetting(ctx, t, replenishmentWaitSetting, fmt.Sprint(int(replenishmentWait.Seconds())))
	class := sandbox.StorageClass()
	class.ObjectMeta = metav1.ObjectMeta{Name: twoReplicasClass}
	class.Parameters = map[string]string{simcluster.ParamNumberOfReplicas: "2", simcluster.ParamDataLocality: string(lhv1.DataLocalityDisabled)}
	class.VolumeBindingMode = ptr.To(storagev1.VolumeBindingImmediate)
	if err := e.c.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	_, _, vol := sandboxtest.RunPodOfClass(ctx, t, e.c, "survivor", "100Gi", twoReplicasClass)
	v := &lhv1.Volume{}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: vol}, v); err != nil {
		t.Fatal(err)
	}
	before := e.replicas(ctx, t, vol)
	var lost lhv1.Replica
	for _, r := range before {
		g, err := e.granted(ctx, r.Spec.DiskID, r.Name)
		if err != nil {
			t.Fatal(err)
		}
		if g != 100*gib || r.Status.CurrentState != lhv1.InstanceStateRunning {
			t.Fatalf("replica %s of %s on %s/%s %s, granted %d: want every replica running and granted 100Gi", r.Name, vol, r.Spec.NodeID, r.Spec.DiskID, r.Status.CurrentState, g)
		}
		if r.Spec.NodeID != v.Status.CurrentNodeID {
			lost = r
		}
	}
	if len(before) != 2 || lost.Name == "" {
		t.Fatalf("want two replicas of %s, one on a node other than its engine's %s; got %d", vol, v.Status.CurrentNodeID, len(before))
	}
	down := lost.Spec.NodeID
	t.Logf("volume %s attached on %s, replicas %s on %s and another; taking %s down", vol, v.Status.CurrentNodeID, lost.Name, down, down)

	start := time.Now()
	e.stopNode(ctx, t, down)
	tl := newTimeline(start)
	var added lhv1.Replica
	lostFailedAt := ""
	testenv.Eventually(t, ctx, 2*nodeDownBound, "a new replica granted, rebuilt and the volume healthy again", func(ctx context.Context) (bool, string, error) {
		var state []string
		kn := &corev1.Node{}
		if err := e.c.Get(ctx, client.ObjectKey{Name: down}, kn); err != nil {
			return false, "", err
		}
		for _, c := range kn.Status.Conditions {
			tl.see(seenKubeNotReady, c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue)
		}
		ln := &lhv1.Node{}
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: down}, ln); err != nil {
			return false, "", err
		}
		for _, c := range ln.Status.Conditions {
			tl.see(seenLonghornDown, c.Type == lhv1.NodeConditionTypeReady && c.Status == lhv1.ConditionStatusFalse &&
				c.Reason == string(lhv1.NodeConditionReasonKubernetesNodeNotReady))
		}
		ims := &lhv1.InstanceManagerList{}
		if err := e.c.List(ctx, ims, client.InNamespace(sandbox.Namespace)); err != nil {
			return false, "", err
		}
		for _, im := range ims.Items {
			if im.Spec.NodeID == down {
				tl.see(seenIMNotRunning, im.Status.CurrentState != lhv1.InstanceManagerStateRunning)
				state = append(state, fmt.Sprintf("instance manager %s %s", im.Name, im.Status.CurrentState))
			}
		}
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: vol}, v); err != nil {
			return false, "", err
		}
		tl.see(seenDegraded, v.Status.Robustness == lhv1.VolumeRobustnessDegraded)
		rebuilt := false
		for _, r := range e.replicas(ctx, t, vol) {
			g, err := e.granted(ctx, r.Spec.DiskID, r.Name)
			if err != nil {
				return false, "", err
			}
			state = append(state, fmt.Sprintf("%s on %s/%s %s failed %q, granted %d", r.Name, r.Spec.NodeID, r.Spec.DiskID, r.Status.CurrentState, r.Spec.FailedAt, g))
			switch {
			case r.Name == lost.Name:
				if r.Spec.FailedAt != lostFailedAt {
					switch {
					case lostFailedAt == "" && !tl.seen(seenReplicaFailed):
						tl.see(seenReplicaFailed, true)
					case r.Spec.FailedAt == "":
						tl.see(seenReused, true)
					default:
						tl.see(seenFailedAgain, true)
					}
					lostFailedAt = r.Spec.FailedAt
				}
				tl.see(seenReplicaTakenOver, takenOver(&r, down))
			case !slices.ContainsFunc(before, func(b lhv1.Replica) bool { return b.Name == r.Name }):
				tl.see(seenReplacement, true)
				tl.see(seenPlaced, r.Spec.DiskID != "" && r.Spec.NodeID != down)
				tl.see(seenGranted, g == 100*gib)
				if r.Spec.HealthyAt != "" && r.Status.CurrentState == lhv1.InstanceStateRunning {
					tl.see(seenReplacementRW, true)
					rebuilt = rebuilt || g == 100*gib
					added = r
				}
			}
		}
		tl.see(seenVolumeHealthy, rebuilt && v.Status.Robustness == lhv1.VolumeRobustnessHealthy)
		state = append(state, fmt.Sprintf("volume %s %s", v.Status.State, v.Status.Robustness))
		return rebuilt && v.Status.Robustness == lhv1.VolumeRobustnessHealthy && lostFailedAt != "", strings.Join(state, "; "), nil
	}, testenv.Every(200*time.Millisecond))
	stall := time.Since(start)
	t.Logf("node %s down: replica %s rebuilt as %s on %s in %s (bound %s); what was seen:%s", down, lost.Name, added.Name, added.Spec.NodeID,
		stall.Round(10*time.Millisecond), nodeDownBound, tl)
	if stall > nodeDownBound {
		t.Errorf("the volume whose replica's node went down was stalled %s, over its bound %s", stall, nodeDownBound)
	}
	if added.Spec.NodeID == down || added.Spec.NodeID == "" {
		t.Errorf("the new replica %s is on node %q, want a node that is up", added.Name, added.Spec.NodeID)
	}
	if at, ok := tl.at[seenKubeNotReady]; !ok || at > nodeNotReadyWithin+15*time.Second {
		t.Errorf("kube-controller-manager marked node %s NotReady %s after it went down, want within %s and 15 s for a loaded machine:%s", down, at, nodeNotReadyWithin, tl)
	}
	if !tl.before(seenLonghornDown, seenReplacement) {
		t.Errorf("Longhorn built the new replica before it knew node %s down (replenishmentWait %s, NotReady within %s):%s", down, replenishmentWait, nodeNotReadyWithin, tl)
	}
	// The rest of the node's going down reaches Longhorn's objects: its
	// instance manager not running, the failed replica taken over by
	// another node's longhorn-manager.
	testenv.Eventually(t, ctx, longhornStallBound, "Longhorn's view of the node down: the Longhorn Node, its instance manager, the failed replica", func(ctx context.Context) (bool, string, error) {
		r := &lhv1.Replica{}
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(&lost), r); err != nil {
			return false, "", err
		}
		tl.see(seenReplicaTakenOver, takenOver(r, down))
		ims := &lhv1.InstanceManagerList{}
		if err := e.c.List(ctx, ims, client.InNamespace(sandbox.Namespace)); err != nil {
			return false, "", err
		}
		for _, im := range ims.Items {
			if im.Spec.NodeID == down {
				tl.see(seenIMNotRunning, im.Status.CurrentState != lhv1.InstanceManagerStateRunning)
			}
		}
		done := tl.seen(seenLonghornDown) && tl.seen(seenIMNotRunning) && tl.seen(seenReplicaTakenOver)
		return done, fmt.Sprintf("replica %s %s, owner %s; seen:%s", r.Name, r.Status.CurrentState, r.Status.OwnerID, tl), nil
	})

	// Longhorn keeps the failed replica until the volume's
	// staleReplicaTimeout (minutes) passes, and its ledger entry stays with
	// it (rule 10 releases an entry only with its Replica); the down node's
	// ledger takes nothing new (rule 8).
	r := &lhv1.Replica{}
	if err := e.c.Get(ctx, client.ObjectKeyFromObject(&lost), r); err != nil {
		t.Fatalf("the failed replica %s: %v (Longhorn keeps it %d minutes)", lost.Name, err, v.Spec.StaleReplicaTimeout)
	}
	if r.Spec.FailedAt == "" || r.Spec.DiskID != lost.Spec.DiskID {
		t.Errorf("the replica on the down node: failed at %q on disk %s, want failed on %s", r.Spec.FailedAt, r.Spec.DiskID, lost.Spec.DiskID)
	}
	g, err := e.granted(ctx, lost.Spec.DiskID, lost.Name)
	if err != nil {
		t.Fatal(err)
	}
	if g != 100*gib {
		t.Errorf("the failed replica %s, which Longhorn keeps, is granted %d on its disk's ledger, want 100Gi", lost.Name, g)
	}
	ds := &dsv1.DiskSchedule{}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: lost.Spec.DiskID}, ds); err != nil {
		t.Fatal(err)
	}
	c := meta.FindStatusCondition(ds.Status.Conditions, dsv1.DiskScheduleConditionReady)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != dsv1.DiskScheduleReasonNodeNotReady {
		t.Fatalf("the down node's ledger says Ready %+v, want False for NodeNotReady", c)
	}
	t.Logf("the failed replica %s stays (staleReplicaTimeout %d min), granted %d on %s's ledger, which is not Ready: %s", lost.Name,
		v.Spec.StaleReplicaTimeout, g, down, c.Message)
	// Nothing over any disk's limit: the failed replica, the healthy one
	// and the new one each hold 100Gi of a different disk.
	list := &dsv1.DiskScheduleList{}
	if err := e.c.List(ctx, list, client.InNamespace(sandbox.Namespace)); err != nil {
		t.Fatal(err)
	}
	for _, ds := range list.Items {
		if ds.Status.StorageScheduled > ds.Status.StorageLimit || meta.IsStatusConditionTrue(ds.Status.Conditions, dsv1.DiskScheduleConditionOvercommitted) {
			t.Errorf("disk %s/%s holds %d of its limit %d", ds.Spec.NodeID, ds.Spec.Name, ds.Status.StorageScheduled, ds.Status.StorageLimit)
		}
	}
}
