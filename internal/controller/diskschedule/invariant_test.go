package diskschedule_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/manager"
	"github.com/longhorn/diskschedule/test/framework/managertest"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

const gi = int64(1) << 30

// noRelease is a mirror grace period longer than any test: requests that no
// Longhorn object backs stay for the DiskSchedule controller to decide.
const noRelease = time.Hour

// workload is a set of concurrent writers racing requests at a few disks.
type workload struct {
	t         *testing.T
	namespace string
	seed      uint64
	writers   int
	ops       int
	disks     []string
}

// fixtures returns 2 nodes with 2 disks of 100Gi each: 400Gi in all, far
// less than the writers ask for.
func (w *workload) fixtures() []testenv.NodeFixture {
	var out []testenv.NodeFixture
	for n := range 2 {
		f := testenv.NodeFixture{Name: fmt.Sprintf("%s-node-%d", w.namespace, n), Disks: map[string]testenv.Disk{}}
		for d := range 2 {
			f.Disks[fmt.Sprintf("disk-%d", d)] = testenv.Disk{UUID: fmt.Sprintf("%s-uuid-%d-%d", w.namespace, n, d), Size: 100 * gi}
		}
		out = append(out, f)
	}
	return out
}

// setUp creates the nodes. The requests name no Longhorn object: the
// managers of these tests give the mirror a grace period far longer than
// the test, so it releases none of them and only the DiskSchedule
// controller's decisions are under test.
func (w *workload) setUp(ctx context.Context) {
	w.t.Helper()
	fixtures := w.fixtures()
	for _, f := range fixtures {
		if err := f.CreateNode(ctx, env.Client, w.namespace); err != nil {
			w.t.Fatal(err)
		}
	}
	w.disks = testenv.DiskUUIDs(fixtures...)
}

func (w *workload) waitReady(ctx context.Context) {
	w.t.Helper()
	testenv.Eventually(w.t, ctx, 60*time.Second, fmt.Sprintf("%d Ready ledgers of 100Gi", len(w.disks)), func(ctx context.Context) (bool, string, error) {
		for _, uuid := range w.disks {
			ds := &dsv1.DiskSchedule{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: w.namespace, Name: uuid}, ds); err != nil {
				return false, err.Error(), client.IgnoreNotFound(err)
			}
			if !meta.IsStatusConditionTrue(ds.Status.Conditions, dsv1.DiskScheduleConditionReady) || ds.Status.StorageLimit != 100*gi {
				return false, testenv.DescribeLedger(ds), nil
			}
		}
		return true, "", nil
	}, testenv.Every(100*time.Millisecond))
}

// writerBackoff retries a conflicting write for as long as a real requester
// would: 32 writers on 4 ledgers conflict often.
var writerBackoff = wait.Backoff{Steps: 2000, Duration: 5 * time.Millisecond, Factor: 1, Jitter: 2}

func replicaName(writer, i int) string { return fmt.Sprintf("w%d-r%d", writer, i) }
func imageName(writer int) string      { return fmt.Sprintf("bi-w%d", writer) }

// run starts the writers, each with its own client, and waits for them.
// Each writer owns its keys; sizes carry a per-writer counter in their low
// bytes so that no (key, size) pair is ever requested twice.
func (w *workload) run(ctx context.Context, phase int) {
	w.t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, w.writers)
	for wr := range w.writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := client.New(env.Config, client.Options{Scheme: env.Scheme})
			if err != nil {
				errs <- err
				return
			}
			rng := rand.New(rand.NewPCG(w.seed, uint64(wr*1000+phase)))
			for op := range w.ops {
				nonce := int64(phase*100000 + op + 1)
				if err := w.step(ctx, c, rng, wr, nonce); err != nil {
					errs <- fmt.Errorf("writer %d: %w", wr, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		w.t.Fatal(err)
	}
}

// step makes one random change to one random ledger's spec, retrying on conflict.
func (w *workload) step(ctx context.Context, c client.Client, rng *rand.Rand, wr int, nonce int64) error {
	key := client.ObjectKey{Namespace: w.namespace, Name: w.disks[rng.IntN(len(w.disks))]}
	op := rng.IntN(10)
	replica := replicaName(wr, rng.IntN(4))
	size := dsv1.RequestedBytes(int64(rng.IntN(40)+1)*gi + nonce)
	return retry.RetryOnConflict(writerBackoff, func() error {
		ds := &dsv1.DiskSchedule{}
		if err := c.Get(ctx, key, ds); err != nil {
			return err
		}
		switch {
		case op < 5: // add or resize (grow or shrink) a replica request
			if ds.Spec.Replicas == nil {
				ds.Spec.Replicas = map[string]dsv1.RequestedBytes{}
			}
			ds.Spec.Replicas[replica] = size
		case op < 7: // remove a replica request
			delete(ds.Spec.Replicas, replica)
		case op < 8: // add or resize a backing-image copy
			if ds.Spec.BackingImages == nil {
				ds.Spec.BackingImages = map[string]dsv1.RequestedBytes{}
			}
			ds.Spec.BackingImages[imageName(wr)] = size
		case op < 9:
			delete(ds.Spec.BackingImages, imageName(wr))
		default: // a reservation, as the extender writes them
			if ds.Spec.Reservations == nil {
				ds.Spec.Reservations = map[string]dsv1.DiskScheduleReservation{}
			}
			ds.Spec.Reservations[fmt.Sprintf("vol-w%d-%d", wr, nonce)] = dsv1.DiskScheduleReservation{Size: int64(size), Pod: "default/pod"}
		}
		return c.Update(ctx, ds)
	})
}

// recorder watches every DiskSchedule version and checks the ledger's
// promise on each: the ledger's invariant (ledger.Violation), with no
// adoption to excuse a ledger over its limit, and a decision on a (key,
// size) never changes.
type recorder struct {
	mu         sync.Mutex
	versions   int
	violations []string
	decisions  map[string]string
}

func watchLedgers(t *testing.T, ctx context.Context, namespace string) *recorder {
	t.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(ctx, &dsv1.DiskScheduleList{}, client.InNamespace(namespace))
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{decisions: map[string]string{}}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if ds, ok := ev.Object.(*dsv1.DiskSchedule); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
				rec.check(ds)
			}
		}
	}()
	return rec
}

func (r *recorder) check(ds *dsv1.DiskSchedule) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.versions++
	fail := func(format string, args ...any) {
		r.violations = append(r.violations, fmt.Sprintf("%s@%s: ", ds.Name, ds.ResourceVersion)+fmt.Sprintf(format, args...))
	}
	st := ds.Status
	for name, e := range st.Replicas {
		r.same(fail, ds.Name+"/replica/"+name, e.RequestedSize, string(e.State), e.ScheduledSize)
	}
	for name, e := range st.BackingImages {
		r.same(fail, ds.Name+"/backingImage/"+name, e.RequestedSize, string(e.State), e.ScheduledSize)
	}
	if v := ledger.Violation(st); v != "" {
		fail("%s", v)
	}
	// No request here names a Longhorn object, so nothing is adopted: not
	// even an Overcommitted ledger may go over its limit.
	if st.StorageScheduled > st.StorageLimit {
		fail("storageScheduled %d > storageLimit %d with nothing adopted", st.StorageScheduled, st.StorageLimit)
	}
}

// same records the decision on (key, size) and fails when it differs from
// one recorded before: a request is decided once.
func (r *recorder) same(fail func(string, ...any), key string, size int64, state string, scheduled int64) {
	id := fmt.Sprintf("%s@%d", key, size)
	decision := fmt.Sprintf("%s/%d", state, scheduled)
	if prev, ok := r.decisions[id]; ok && prev != decision {
		fail("%s decided twice: %s, then %s", id, prev, decision)
	}
	r.decisions[id] = decision
}

func (r *recorder) report(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	t.Logf("checked %d DiskSchedule versions, %d distinct decisions", r.versions, len(r.decisions))
	if r.versions == 0 {
		t.Error("the watch saw no DiskSchedule version")
	}
	for _, v := range r.violations {
		t.Error(v)
	}
}

// waitAllDecided waits until every ledger has decided its current spec, then
// checks that every spec key has a decision at its size and that no released
// key is still counted.
func (w *workload) waitAllDecided(ctx context.Context) {
	w.t.Helper()
	testenv.Eventually(w.t, ctx, 90*time.Second, "every request is decided", func(ctx context.Context) (bool, string, error) {
		for _, uuid := range w.disks {
			ds := &dsv1.DiskSchedule{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: w.namespace, Name: uuid}, ds); err != nil {
				return false, "", err
			}
			if problem := undecided(ds); problem != "" {
				return false, problem, nil
			}
		}
		return true, "", nil
	}, testenv.Every(200*time.Millisecond))
}

// undecided says what in ds is not decided, or "".
func undecided(ds *dsv1.DiskSchedule) string {
	if ds.Status.ObservedGeneration != ds.Generation {
		return fmt.Sprintf("%s: observedGeneration %d of generation %d", ds.Name, ds.Status.ObservedGeneration, ds.Generation)
	}
	for name, size := range ds.Spec.Replicas {
		if e, ok := ds.Status.Replicas[name]; !ok || e.RequestedSize != int64(size) {
			return fmt.Sprintf("%s: replica %s at %d undecided", ds.Name, name, size)
		}
	}
	for name, size := range ds.Spec.BackingImages {
		if e, ok := ds.Status.BackingImages[name]; !ok || e.RequestedSize != int64(size) {
			return fmt.Sprintf("%s: backing image %s at %d undecided", ds.Name, name, size)
		}
	}
	for name := range ds.Spec.Reservations {
		if _, ok := ds.Status.Reservations[name]; !ok {
			return fmt.Sprintf("%s: reservation %s undecided", ds.Name, name)
		}
	}
	for name := range ds.Status.Replicas {
		if _, ok := ds.Spec.Replicas[name]; !ok {
			return fmt.Sprintf("%s: released replica %s still in status", ds.Name, name)
		}
	}
	for name := range ds.Status.BackingImages {
		if _, ok := ds.Spec.BackingImages[name]; !ok {
			return fmt.Sprintf("%s: released backing image %s still in status", ds.Name, name)
		}
	}
	return ""
}

func startManagers(t *testing.T, namespace string, n int, clk clock.PassiveClock) []*testenv.RunningManager {
	t.Helper()
	var out []*testenv.RunningManager
	for range n {
		m, err := managertest.Start(env, env.Config, manager.Options{Namespace: namespace, LedgerWorkers: 4, GateGrace: noRelease, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Stop() })
		out = append(out, m)
	}
	return out
}

// TestLedgerInvariantUnderConcurrency races 32 writers at 4 disks whose
// limits fit only part of what they ask, with one DiskSchedule controller
// and with two at once (no leader election): correctness rests on
// resourceVersion conflicts, not on leadership.
func TestLedgerInvariantUnderConcurrency(t *testing.T) {
	for _, tc := range []struct {
		seed     uint64
		managers int
	}{{1, 1}, {2, 1}, {4, 2}, {5, 2}} {
		t.Run(fmt.Sprintf("seed-%d-controllers-%d", tc.seed, tc.managers), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			w := &workload{t: t, namespace: newNamespace(t), seed: tc.seed, writers: 32, ops: 12}
			t.Logf("seed %d, %d writers, %d DiskSchedule controllers", tc.seed, w.writers, tc.managers)
			startManagers(t, w.namespace, tc.managers, nil)
			w.setUp(ctx)
			w.waitReady(ctx)
			rec := watchLedgers(t, ctx, w.namespace)
			w.run(ctx, 1)
			w.waitAllDecided(ctx)
			rec.report(t)
		})
	}
}

// TestLedgerRestartMidStream stops the controller while requests are
// pending and starts a new one: every request is decided, none twice.
func TestLedgerRestartMidStream(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &workload{t: t, namespace: newNamespace(t), seed: 6, writers: 32, ops: 8}
	first := startManagers(t, w.namespace, 1, nil)[0]
	w.setUp(ctx)
	w.waitReady(ctx)
	rec := watchLedgers(t, ctx, w.namespace)
	w.run(ctx, 1)
	if err := first.Stop(); err != nil {
		t.Fatalf("stopping the first manager: %v", err)
	}
	w.run(ctx, 2) // no controller runs: these requests stay pending
	pending := 0
	for _, uuid := range w.disks {
		ds := &dsv1.DiskSchedule{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: w.namespace, Name: uuid}, ds); err != nil {
			t.Fatal(err)
		}
		if undecided(ds) != "" {
			pending++
		}
	}
	if pending == 0 {
		t.Fatal("expected pending requests while no controller runs")
	}
	t.Logf("%d of %d ledgers had pending requests at the restart", pending, len(w.disks))
	startManagers(t, w.namespace, 1, nil)
	w.waitAllDecided(ctx)
	rec.report(t)
}
