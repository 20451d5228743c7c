package gate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/manager"
	"github.com/longhorn/diskschedule/test/framework/testenv"
	"github.com/longhorn/diskschedule/test/framework/testenv/replicawriter"
	"github.com/longhorn/diskschedule/test/framework/testenv/sandboxtest"
	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
)

const (
	gib = int64(1) << 30
	// writers is how many volumes, each placed by its own volume
	// controller, are placed at once.
	writers = 32
	// managerPods is how many longhorn-manager pods own the volumes, each
	// with its own datastore: their views are independently stale.
	managerPods = 3
	// replicaSize is each volume's size: 32 × 100Gi on 4 × 400Gi disks is
	// twice what fits.
	replicaSize = 100 * gib
	// grace is the managers' --gate-grace: grants no write backs and that
	// the mirror cannot tell lost are released this long after them.
	grace = 3 * time.Second
	// lossRate is the share of writes another client makes lose on
	// resourceVersion while the gate holds them, until one of the volume's
	// writes lost so.
	lossRate = 0.3
	// resync stands for longhorn-manager's informer resync (30 s): a
	// volume dropped from the queue after its refused writes is looked at
	// again after it when no Longhorn Node changed, shortened as the
	// managers' --gate-grace is (30 s → 3 s).
	resync = 3 * time.Second
)

// topology is 4 nodes with one 400Gi disk each.
func topology() *sandbox.Topology {
	t := &sandbox.Topology{}
	for i := 1; i <= 4; i++ {
		t.Nodes = append(t.Nodes, sandbox.Node{
			Name:  fmt.Sprintf("node-%d", i),
			Disks: []sandbox.Disk{{Name: "disk-1", Size: 400 * gib}},
		})
	}
	return t
}

// run is one attack's outcome.
type run struct {
	// limits and persisted are per disk UUID: each ledger's limit, and the
	// largest Σ volumeSize of the replicas whose spec.diskID named the disk
	// at any event the watch delivered.
	limits, peak map[string]int64
	// names are the disks' names for people.
	names map[string]string
	// placed, denied and lost count replicas placed, writes refused by the
	// gate, and writes that lost on resourceVersion while the gate held
	// their request.
	placed, denied, lost int
	// events counts the Replica events watched.
	events int
}

// fullest returns the largest peak in percent of its disk's limit, and the disk.
func (r *run) fullest() (float64, string) {
	best, name := 0.0, ""
	for uuid, p := range r.peak {
		if pct := 100 * float64(p) / float64(r.limits[uuid]); pct > best || name == "" {
			best, name = pct, r.names[uuid]
		}
	}
	return best, name
}

// over lists the disks whose peak went over their limit.
func (r *run) over() []string {
	var out []string
	for uuid, p := range r.peak {
		if p > r.limits[uuid] {
			out = append(out, fmt.Sprintf("%s: %s of %s", r.names[uuid], ledger.Bytes(p), ledger.Bytes(r.limits[uuid])))
		}
	}
	sort.Strings(out)
	return out
}

// startSandbox starts a sandbox on the nodes and disks of topo where
// Longhorn runs the nodes only: Longhorn Nodes with their disks' status, and
// the instance managers, kept by longhorn-manager's own node, instance
// manager and Kubernetes node controllers on the simulated data plane, and
// the engine image Longhorn's scheduler requires; no volume controller,
// whose part the test's writers play with Longhorn's own code; with
// managers managers.
// The sandbox's logs are kept when the test fails.
func startSandbox(t *testing.T, topo *sandbox.Topology, managers int, withGate bool) *sandbox.Sandbox {
	t.Helper()
	hooks := make([]sandbox.ManagerHook, managers)
	for i := range hooks {
		hooks[i] = withGrace
	}
	return sandboxtest.Start(t, sandboxtest.Options{
		Sandbox: sandbox.Options{
			Topology:          topo,
			LonghornNodesOnly: true,
			NoGate:            !withGate,
			Managers:          hooks,
		},
		KeepLogs: true,
	})
}

// withGrace shortens the managers' --gate-grace, so lost writes are
// released within the test.
func withGrace(opts *manager.Options, _ *rest.Config) { opts.GateGrace = grace }

// disks reads every disk's ledger, of which there must be n: UUID → limit,
// and UUID → node/disk.
func disks(ctx context.Context, t *testing.T, c client.Client, n int) (map[string]int64, map[string]string) {
	t.Helper()
	list := &dsv1.DiskScheduleList{}
	if err := c.List(ctx, list, client.InNamespace(sandbox.Namespace)); err != nil {
		t.Fatal(err)
	}
	limits, names := map[string]int64{}, map[string]string{}
	for _, ds := range list.Items {
		limits[ds.Name] = ds.Status.StorageLimit
		names[ds.Name] = ds.Spec.NodeID + "/" + ds.Spec.Name
	}
	if len(limits) != n {
		t.Fatalf("%d ledgers, want %d", len(limits), n)
	}
	return limits, names
}

// volume is one volume of the attack and its replica.
type volume struct{ name, replica string }

// createVolumes creates n Longhorn Volumes of replicaSize as the Longhorn
// CSI driver does, each with its unscheduled replica as Longhorn's volume
// controller creates it (replicawriter.CreateVolume).
func createVolumes(ctx context.Context, t *testing.T, c client.Client, prefix string, n int) []volume {
	t.Helper()
	var out []volume
	for i := 0; i < n; i++ {
		rep, err := replicawriter.CreateVolume(ctx, c, sandbox.Namespace, fmt.Sprintf("%s-%02d", prefix, i), replicaSize)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, volume{name: rep.Spec.VolumeName, replica: rep.Name})
	}
	return out
}

// watchReplicas follows every Replica event until ctx ends and records, per
// disk, the largest number of bytes persisted on it
// (ledger.PersistedByDisk; the attack creates no backing image, whose
// copies are read when the watch starts).
func watchReplicas(ctx context.Context, t *testing.T, c client.WithWatch, r *run) (func(), error) {
	list := &lhv1.ReplicaList{}
	if err := c.List(ctx, list, client.InNamespace(sandbox.Namespace)); err != nil {
		return nil, err
	}
	images := &lhv1.BackingImageList{}
	if err := c.List(ctx, images, client.InNamespace(sandbox.Namespace)); err != nil {
		return nil, err
	}
	w, err := c.Watch(ctx, &lhv1.ReplicaList{}, client.InNamespace(sandbox.Namespace), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	if err != nil {
		return nil, err
	}
	on := map[string]lhv1.Replica{}
	done := make(chan struct{})
	var stopping atomic.Bool
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			rep, ok := ev.Object.(*lhv1.Replica)
			if !ok {
				if ev.Type == watch.Error && !stopping.Load() {
					t.Errorf("the replica watch failed: %v", ev.Object)
				}
				continue
			}
			r.events++
			if ev.Type == watch.Deleted {
				delete(on, rep.Name)
			} else {
				on[rep.Name] = *rep
			}
			now := make([]lhv1.Replica, 0, len(on))
			for _, x := range on {
				now = append(now, x)
			}
			for disk, p := range ledger.PersistedByDisk(now, images.Items, nil) {
				r.peak[disk] = max(r.peak[disk], p.Total())
			}
		}
	}()
	return func() { stopping.Store(true); w.Stop(); <-done }, nil
}

// attack runs the writers against a sandbox; restart, when set, is called
// once a third of the placements have been tried. The writers are
// Longhorn's own code: managerPods longhorn-manager pods, each with its own
// datastore and replica scheduler, and one volume controller per volume on
// the pod that owns the volume (round-robin).
func attack(t *testing.T, sb *sandbox.Sandbox, seed int64, restart func()) *run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cfg := sb.AdminConfig()
	cfg.QPS, cfg.Burst = 500, 1000
	c := sandboxtest.WatchingClient(t, sb)
	limits, names := disks(ctx, t, c, len(topology().Nodes))
	r := &run{limits: limits, peak: map[string]int64{}, names: names}
	pods, err := replicawriter.StartPods(ctx, cfg, sandbox.Namespace, podNodes()...)
	if err != nil {
		t.Fatal(err)
	}
	stop, err := watchReplicas(ctx, t, c, r)
	if err != nil {
		t.Fatal(err)
	}
	volumes := createVolumes(ctx, t, c, fmt.Sprintf("attack-%d", seed), writers)
	owned := make([]map[string][]string, len(pods))
	for i, v := range volumes {
		if owned[i%len(pods)] == nil {
			owned[i%len(pods)] = map[string][]string{}
		}
		owned[i%len(pods)][v.name] = []string{v.replica}
	}
	for i, p := range pods {
		if err := p.WaitForVolumes(ctx, owned[i]); err != nil {
			t.Fatal(err)
		}
	}

	var (
		mu       sync.Mutex
		tries    int
		restartd sync.Once
		wg       sync.WaitGroup
		errs     []error
	)
	for i, v := range volumes {
		wg.Go(func() {
			rnd := rand.New(rand.NewSource(seed*1000 + int64(i)))
			out, err := pods[i%len(pods)].Place(ctx, v.name, v.replica, replicawriter.Options{
				Live:   c,
				Resync: resync,
				Lose:   func(o replicawriter.Outcome) bool { return o.Lost == 0 && rnd.Float64() < lossRate },
				Writing: func() {
					mu.Lock()
					tries++
					n := tries
					mu.Unlock()
					if restart != nil && n == writers/3 {
						restartd.Do(restart)
					}
				},
			})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("volume %s: %w", v.name, err))
			}
			if out.Placed {
				r.placed++
			}
			r.denied += out.Denied
			r.lost += out.Lost
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("the writers did not finish: %v", err)
	}
	stop()
	// Count what is persisted now too, should the watch have stopped
	// before delivering the last writes.
	waitQuiet(ctx, t, c, r)
	return r
}

// podNodes names the nodes of the longhorn-manager pods that place the
// replicas: the first managerPods nodes of the topology.
func podNodes() []string {
	var out []string
	for _, n := range topology().Nodes[:managerPods] {
		out = append(out, n.Name)
	}
	return out
}

// waitQuiet adds what is persisted now to the peaks.
func waitQuiet(ctx context.Context, t *testing.T, c client.Client, r *run) {
	t.Helper()
	list := &lhv1.ReplicaList{}
	if err := c.List(ctx, list, client.InNamespace(sandbox.Namespace)); err != nil {
		t.Fatal(err)
	}
	images := &lhv1.BackingImageList{}
	if err := c.List(ctx, images, client.InNamespace(sandbox.Namespace)); err != nil {
		t.Fatal(err)
	}
	for disk, p := range ledger.PersistedByDisk(list.Items, images.Items, nil) {
		r.peak[disk] = max(r.peak[disk], p.Total())
	}
}

// settle waits until every ledger equals what is persisted on its disk and
// has nothing pending: nothing leaked, every request decided.
func settle(t *testing.T, c client.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	testenv.Eventually(t, ctx, 90*time.Second, "the ledgers settle on what is persisted", func(ctx context.Context) (bool, string, error) {
		off, err := testenv.Unsettled(ctx, c, sandbox.Namespace)
		return off == "" && err == nil, off, err
	}, testenv.Every(200*time.Millisecond))
}

// dumpLedgersAndReplicas logs every DiskSchedule (spec and status) and
// every Replica's disk and resourceVersion, to trace a broken invariant.
func dumpLedgersAndReplicas(t *testing.T, c client.Client) {
	t.Helper()
	ctx := context.Background()
	ledgers := &dsv1.DiskScheduleList{}
	if err := c.List(ctx, ledgers, client.InNamespace(sandbox.Namespace)); err != nil {
		t.Logf("listing the DiskSchedules: %v", err)
	}
	for _, ds := range ledgers.Items {
		spec, _ := json.Marshal(ds.Spec)
		status, _ := json.Marshal(ds.Status)
		t.Logf("DiskSchedule %s (disk %s of node %s), generation %d, version %s:\n  spec %s\n  status %s",
			ds.Name, ds.Spec.Name, ds.Spec.NodeID, ds.Generation, ds.ResourceVersion, spec, status)
	}
	replicas := &lhv1.ReplicaList{}
	if err := c.List(ctx, replicas, client.InNamespace(sandbox.Namespace)); err != nil {
		t.Logf("listing the Replicas: %v", err)
	}
	for _, r := range replicas.Items {
		t.Logf("Replica %s: disk %q, data directory %q, version %s, labels %v", r.Name, r.Spec.DiskID, r.Spec.DataDirectoryName,
			r.ResourceVersion, r.Labels)
	}
}
