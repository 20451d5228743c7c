package gate_test

import (
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/manager"
	"github.com/longhorn/diskschedule/internal/sandbox"
	"github.com/longhorn/diskschedule/internal/simlonghorn"
	"github.com/longhorn/diskschedule/internal/testenv"
)

const (
	gib = int64(1) << 30
	// writers is how many volume controllers place replicas at once.
	writers = 32
	// replicaSize is each volume's size: 32 × 100Gi on 4 × 400Gi disks is
	// twice what fits.
	replicaSize = 100 * gib
	// grace is the managers' --gate-grace: admitted writes that were lost
	// are released this long after their grant.
	grace = 3 * time.Second
	// lossRate is the share of placements whose write is lost after the
	// gate admitted it (a stale resourceVersion).
	lossRate = 0.15
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
	// placed, denied and lost count placements persisted, refused by the
	// gate, and admitted but lost to a stale resourceVersion.
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

// startSandbox starts a sandbox with Longhorn's Nodes and disks but no
// simulated volume controller (the test's writers are the volume
// controllers), with managers managers.
func startSandbox(t *testing.T, managers int, withGate bool) *sandbox.Sandbox {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	root := testenv.RepoRoot()
	hooks := make([]sandbox.ManagerHook, managers)
	for i := range hooks {
		hooks[i] = withGrace
	}
	out := &strings.Builder{}
	var mu sync.Mutex
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sb, err := sandbox.Start(ctx, sandbox.Options{
		Topology:          topology(),
		LonghornNodesOnly: true,
		NoGate:            !withGate,
		ConfigDir:         filepath.Join(root, "config"),
		AssetsDir:         testenv.AssetsDir(),
		LogDir:            filepath.Join(t.TempDir(), "logs"),
		Out:               lockedWriter{&mu, out},
		Managers:          hooks,
	})
	if err != nil {
		t.Fatalf("starting the sandbox: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if err := sb.Stop(); err != nil {
			t.Errorf("stopping the sandbox: %v", err)
		}
	})
	return sb
}

// withGrace shortens the managers' --gate-grace, so lost writes are
// released within the test.
func withGrace(opts *manager.Options, _ *rest.Config) { opts.GateGrace = grace }

type lockedWriter struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// disks reads every disk's ledger: UUID → limit, and UUID → node and name.
func disks(ctx context.Context, t *testing.T, c client.Client) (map[string]int64, map[string]string, map[string]string) {
	t.Helper()
	list := &dsv1.DiskScheduleList{}
	if err := c.List(ctx, list, client.InNamespace(sandbox.Namespace)); err != nil {
		t.Fatal(err)
	}
	limits, nodes, names := map[string]int64{}, map[string]string{}, map[string]string{}
	for _, ds := range list.Items {
		limits[ds.Name] = ds.Status.StorageLimit
		nodes[ds.Name] = ds.Spec.NodeID
		names[ds.Name] = ds.Spec.NodeID + "/" + ds.Spec.Name
	}
	if len(limits) != 4 {
		t.Fatalf("%d ledgers, want 4", len(limits))
	}
	return limits, nodes, names
}

// createVolumes creates n Longhorn Volumes of replicaSize as the Longhorn
// CSI driver does, each with one unscheduled replica as Longhorn's volume
// controller creates it.
func createVolumes(ctx context.Context, t *testing.T, c client.Client, prefix string, n int) []types.NamespacedName {
	t.Helper()
	class := sandbox.StorageClass()
	var out []types.NamespacedName
	for i := 0; i < n; i++ {
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i), Namespace: "default", UID: types.UID(fmt.Sprintf("%s-%02d", prefix, i))},
			Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(replicaSize, resource.BinarySI)},
			}},
		}
		vol, err := simlonghorn.VolumeFor(pvc, class, sandbox.Namespace)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, vol); err != nil {
			t.Fatalf("creating volume %s: %v", vol.Name, err)
		}
		rep := simlonghorn.NewReplica(vol, "", "0")
		if err := c.Create(ctx, rep); err != nil {
			t.Fatalf("creating replica %s: %v", rep.Name, err)
		}
		out = append(out, client.ObjectKeyFromObject(rep))
	}
	return out
}

// watchReplicas follows every Replica event until ctx ends and records, per
// disk, the largest Σ volumeSize persisted on it.
func watchReplicas(ctx context.Context, t *testing.T, c client.WithWatch, r *run) (func(), error) {
	list := &lhv1.ReplicaList{}
	if err := c.List(ctx, list, client.InNamespace(sandbox.Namespace)); err != nil {
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
			for disk, sum := range testenv.PersistedPerDisk(now) {
				r.peak[disk] = max(r.peak[disk], sum)
			}
		}
	}()
	return func() { stopping.Store(true); w.Stop(); <-done }, nil
}

// attack runs the writers against a sandbox; restart, when set, is called
// once a third of the placements have been tried.
func attack(t *testing.T, sb *sandbox.Sandbox, seed int64, restart func()) *run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cfg := sb.AdminConfig()
	cfg.QPS, cfg.Burst = 500, 1000
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: sb.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	limits, nodes, names := disks(ctx, t, c)
	r := &run{limits: limits, peak: map[string]int64{}, names: names}
	stop, err := watchReplicas(ctx, t, c, r)
	if err != nil {
		t.Fatal(err)
	}
	replicas := createVolumes(ctx, t, c, fmt.Sprintf("attack-%d", seed), writers)

	// view is the writers' shared cache of what is persisted per disk,
	// refreshed only now and then: as stale as a volume controller's.
	v := &view{c: c}
	if err := v.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		tries    int
		restartd sync.Once
		wg       sync.WaitGroup
	)
	for i, key := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewSource(seed*1000 + int64(i)))
			res := place(ctx, c, v, rnd, key, limits, nodes, func() {
				mu.Lock()
				tries++
				n := tries
				mu.Unlock()
				if restart != nil && n == writers/3 {
					restartd.Do(restart)
				}
			})
			mu.Lock()
			defer mu.Unlock()
			r.placed += res.placed
			r.denied += res.denied
			r.lost += res.lost
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("the writers did not finish: %v", ctx.Err())
	}
	stop()
	// Count what is persisted now too, should the watch have stopped
	// before delivering the last writes.
	waitQuiet(ctx, t, c, r)
	return r
}

// waitQuiet adds what is persisted now to the peaks.
func waitQuiet(ctx context.Context, t *testing.T, c client.Client, r *run) {
	t.Helper()
	list := &lhv1.ReplicaList{}
	if err := c.List(ctx, list, client.InNamespace(sandbox.Namespace)); err != nil {
		t.Fatal(err)
	}
	for disk, sum := range testenv.PersistedPerDisk(list.Items) {
		r.peak[disk] = max(r.peak[disk], sum)
	}
}

// view is a stale, shared picture of the bytes persisted per disk.
type view struct {
	c    client.Client
	mu   sync.Mutex
	used map[string]int64
}

func (v *view) refresh(ctx context.Context) error {
	list := &lhv1.ReplicaList{}
	if err := v.c.List(ctx, list, client.InNamespace(sandbox.Namespace)); err != nil {
		return err
	}
	used := testenv.PersistedPerDisk(list.Items)
	v.mu.Lock()
	defer v.mu.Unlock()
	v.used = used
	return nil
}

func (v *view) snapshot() map[string]int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make(map[string]int64, len(v.used))
	for k, b := range v.used {
		out[k] = b
	}
	return out
}

// outcome is one writer's count of what happened to its placements.
type outcome struct{ placed, denied, lost int }

// place is one volume controller placing its replica: it picks a disk that
// fits in its stale view, writes the replica with a whole-object Update as
// Longhorn does, and tries again when the write is refused. Some of its
// writes are lost after admission: it sends them with a resourceVersion
// that another write already made stale. It gives up when a fresh view has
// no disk with room.
func place(ctx context.Context, c client.Client, v *view, rnd *rand.Rand, key types.NamespacedName, limits map[string]int64, nodes map[string]string, tried func()) outcome {
	var out outcome
	for attempt := 0; attempt < 400 && ctx.Err() == nil; attempt++ {
		fresh := attempt > 0 && rnd.Intn(3) == 0
		if fresh {
			_ = v.refresh(ctx)
		}
		used := v.snapshot()
		var fits []string
		for disk, limit := range limits {
			if used[disk]+replicaSize <= limit {
				fits = append(fits, disk)
			}
		}
		if len(fits) == 0 {
			if fresh {
				return out
			}
			continue
		}
		sort.Strings(fits)
		disk := fits[rnd.Intn(len(fits))]
		rep := &lhv1.Replica{}
		if err := c.Get(ctx, key, rep); err != nil {
			continue
		}
		next := rep.DeepCopy()
		next.Spec.NodeID, next.Spec.DiskID = nodes[disk], disk
		next.Spec.DiskPath = "/var/lib/longhorn/"
		next.Spec.DataDirectoryName = key.Name + "-data"
		lose := rnd.Float64() < lossRate
		if lose {
			// Another writer touches the replica first: this write is
			// admitted, then refused by the API server's optimistic lock.
			touch := rep.DeepCopy()
			if touch.Labels == nil {
				touch.Labels = map[string]string{}
			}
			touch.Labels["diskschedule.test/touched"] = fmt.Sprint(attempt)
			if err := c.Update(ctx, touch); err != nil {
				continue
			}
		}
		tried()
		err := c.Update(ctx, next)
		switch {
		case err == nil:
			out.placed++
			return out
		case apierrors.IsConflict(err):
			if lose {
				out.lost++
			}
		case apierrors.IsForbidden(err): // the gate denied it
			out.denied++
			time.Sleep(time.Duration(5+rnd.Intn(45)) * time.Millisecond)
		default:
			// The gate did not answer in time, or a manager was stopping:
			// Longhorn requeues and tries again.
			time.Sleep(time.Duration(20+rnd.Intn(80)) * time.Millisecond)
		}
	}
	return out
}

// settle waits until every ledger equals what is persisted on its disk and
// has nothing pending: nothing leaked, every request decided.
func settle(t *testing.T, c client.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var last string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		off, err := testenv.Unsettled(ctx, c, sandbox.Namespace)
		last = off
		return off == "" && err == nil, err
	})
	if err != nil {
		t.Fatalf("the ledgers never settled on what is persisted: %s", last)
	}
}
