// Package ledgerbench measures the DiskSchedule ledger against the API server
// it runs on: ledger decisions per second and request→decision latency, beside
// the raw status-update and spec-update rates and round trips of the same API
// server, measured in the same run on the same CRD and printed as ratios.
//
// It holds only benchmarks; the test control plane starts only when -bench is
// given, so `go test ./...` passes at once. Figures and the command are
// recorded in docs/benchmarks.md.
package ledgerbench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	longhornv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/ledgerclient"
	"github.com/longhorn/diskschedule/internal/manager"
	"github.com/longhorn/diskschedule/internal/requirement"
	"github.com/longhorn/diskschedule/test/bench/benchutil"
	"github.com/longhorn/diskschedule/test/framework/managertest"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

const (
	gi = int64(1) << 30
	// diskSize is every disk's size: 10Ti, so no 1Gi request is ever rejected.
	diskSize = 10 << 40
	// requestSize is the base size of every request; each request adds a
	// unique number of bytes so that no (key, size) pair is written twice.
	requestSize = gi
	// disksPerNode is how many disks each simulated node carries.
	disksPerNode = 8
	// phaseTimeout bounds one measured phase.
	phaseTimeout = 3 * time.Minute
)

// env is the test control plane, started by TestMain only when benchmarks run.
var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.RunBenchmarks(m, func(e *testenv.Env) { env = e }))
}

// BenchmarkLedger measures, for each shape (disks × concurrent writers), in
// one run and against one API server:
//
//   - raw status update: Status().Update of a DiskSchedule's
//     status.replicas entry through ledgerclient's read-modify-write loop
//     (read, Update with the read resourceVersion, retry on conflict), in a
//     namespace where no controller runs: the write the ledger's controller
//     makes, at the same concurrency;
//   - raw status patch: a merge patch of the same entry with no
//     resourceVersion, one round trip with no read, conflicts resolved by the
//     API server (and retried when it gives up): how fast the API server
//     commits writes to these objects;
//   - raw spec update: a request written with ledgerclient, in the same
//     namespace: the requester's half of a ledger op;
//   - ledger: the same request written where the manager runs, timed until
//     a shared informer sees it decided (status.replicas[name].requestedSize
//     equal to the size written, or status.observedGeneration at least the
//     generation written).
//
// Each b.N iteration is one op of each phase, spread over the writers, each
// writer one op at a time; ns/op covers the ledger phase only. Figures are
// reported as metrics (ratios are ledger ÷ raw status update) and, for all
// shapes, as a Markdown table on stdout. There are no thresholds.
func BenchmarkLedger(b *testing.B) {
	if env == nil {
		b.Skip("the test control plane starts only with -bench")
	}
	fmt.Printf("load average at start: %s\n", benchutil.LoadAverage())
	var rows []result
	for _, disks := range []int{1, 64} {
		b.Run(fmt.Sprintf("disks=%d", disks), func(b *testing.B) {
			for _, writers := range []int{8, 32} {
				fx := &fixture{disks: disks, writers: writers}
				var last *result
				ok := b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
					last = fx.bench(b)
				})
				if err := fx.close(); err != nil {
					b.Error(err)
				}
				if ok && last != nil {
					rows = append(rows, *last)
				}
			}
		})
	}
	if len(rows) > 0 {
		// Printed rather than logged: a parent benchmark's log is not shown.
		fmt.Print(table(rows))
	}
	fmt.Printf("load average at end: %s\n", benchutil.LoadAverage())
}

// result is one shape's figures from its last (full-size) run.
type result struct {
	disks, writers int
	ledger         figures
	rawStatus      figures
	rawPatch       figures
	rawSpec        figures
	statusWrites   int
	nodeWrites     int
}

// bench runs one shape: the raw phases first, then the ledger, and reports
// every figure and the ratios as metrics.
func (f *fixture) bench(b *testing.B) *result {
	b.StopTimer()
	ctx := context.Background()
	if err := f.setUp(ctx); err != nil {
		b.Fatal(err)
	}
	r := &result{disks: f.disks, writers: f.writers}
	for _, phase := range []struct {
		name string
		do   op
		out  *figures
	}{
		{"raw status updates", f.rawStatusOp, &r.rawStatus},
		{"raw status patches", f.rawPatchOp, &r.rawPatch},
		{"raw spec updates", f.rawSpecOp, &r.rawSpec},
	} {
		fig, err := f.run(ctx, b.N, phase.do)
		if err != nil {
			b.Fatalf("measuring %s: %v", phase.name, err)
		}
		*phase.out = fig
	}
	f.tracker.ResetStatusWrites()
	f.nodeWrites.Store(0)
	b.ResetTimer()
	b.StartTimer()
	ledger, err := f.run(ctx, b.N, f.ledgerOp)
	b.StopTimer()
	if err != nil {
		b.Fatalf("measuring ledger decisions: %v", err)
	}
	r.ledger = ledger
	r.statusWrites, r.nodeWrites = f.tracker.StatusWrites(), int(f.nodeWrites.Load())

	b.ReportMetric(ledger.rate(), "decisions/s")
	b.ReportMetric(benchutil.Millis(ledger.p50), "p50-ms")
	b.ReportMetric(benchutil.Millis(ledger.p99), "p99-ms")
	b.ReportMetric(r.rawStatus.rate(), "raw-status/s")
	b.ReportMetric(benchutil.Millis(r.rawStatus.p50), "raw-status-p50-ms")
	b.ReportMetric(benchutil.Millis(r.rawStatus.p99), "raw-status-p99-ms")
	b.ReportMetric(r.rawPatch.rate(), "raw-patch/s")
	b.ReportMetric(r.rawSpec.rate(), "raw-spec/s")
	b.ReportMetric(ledger.rate()/r.rawStatus.rate(), "rate-ratio")
	b.ReportMetric(benchutil.Ratio(ledger.p50, r.rawStatus.p50), "p50-ratio")
	b.ReportMetric(benchutil.Ratio(ledger.p99, r.rawStatus.p99), "p99-ratio")
	b.ReportMetric(r.decisionsPerWrite(), "decisions/status-write")
	b.ReportMetric(float64(r.nodeWrites)/float64(ledger.ops), "node-writes/decision")
	return r
}

func (r result) decisionsPerWrite() float64 {
	if r.statusWrites == 0 {
		return 0
	}
	return float64(r.ledger.ops) / float64(r.statusWrites)
}

// table renders the results as two Markdown tables, figures and ratios,
// ready for docs/benchmarks.md.
func table(rows []result) string {
	var sb strings.Builder
	sb.WriteString("\n| disks | writers | ops | ledger decisions/s | ledger p50 / p99 ms | raw status updates/s | raw status update p50 / p99 ms | raw status patches/s | raw status patch p50 / p99 ms | raw spec updates/s | raw spec update p50 / p99 ms |\n")
	sb.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		fmt.Fprintf(&sb, "| %d | %d | %d | %.0f | %.1f / %.1f | %.0f | %.1f / %.1f | %.0f | %.1f / %.1f | %.0f | %.1f / %.1f |\n",
			r.disks, r.writers, r.ledger.ops,
			r.ledger.rate(), benchutil.Millis(r.ledger.p50), benchutil.Millis(r.ledger.p99),
			r.rawStatus.rate(), benchutil.Millis(r.rawStatus.p50), benchutil.Millis(r.rawStatus.p99),
			r.rawPatch.rate(), benchutil.Millis(r.rawPatch.p50), benchutil.Millis(r.rawPatch.p99),
			r.rawSpec.rate(), benchutil.Millis(r.rawSpec.p50), benchutil.Millis(r.rawSpec.p99))
	}
	sb.WriteString("\n| disks | writers | decisions/s ÷ raw status updates/s | ledger p50 ÷ raw status update p50 | ledger p99 ÷ raw status update p99 | decisions/s ÷ raw status patches/s | decisions/s ÷ raw spec updates/s | decisions per status write | Node writes per decision | conflicts per op: ledger writers / raw status updates |\n")
	sb.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		fmt.Fprintf(&sb, "| %d | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f / %.2f |\n",
			r.disks, r.writers,
			r.ledger.rate()/r.rawStatus.rate(), benchutil.Ratio(r.ledger.p50, r.rawStatus.p50), benchutil.Ratio(r.ledger.p99, r.rawStatus.p99),
			r.ledger.rate()/r.rawPatch.rate(), r.ledger.rate()/r.rawSpec.rate(),
			r.decisionsPerWrite(), float64(r.nodeWrites)/float64(r.ledger.ops),
			r.ledger.conflictsPerOp(), r.rawStatus.conflictsPerOp())
	}
	return sb.String()
}

// fixture is one shape's objects: a raw namespace with plain DiskSchedules
// and no controller, and a ledger namespace with Ready nodes, their
// DiskSchedules and a running manager.
type fixture struct {
	disks, writers int

	ready       bool
	rawNS       string
	ledgerNS    string
	rawDisks    []string
	ledgerDisks []string
	clients     []client.Client
	manager     *testenv.RunningManager
	stopCache   context.CancelFunc
	tracker     *benchutil.Tracker
	// nodeWrites counts the Longhorn Node writes seen since the tracker's
	// status writes were last reset (none: the manager never writes a
	// Longhorn Node; a non-zero figure would be a bug).
	nodeWrites atomic.Int64
	// seq makes every request's size unique for the fixture's lifetime,
	// across the probe run (b.N = 1) and the full run.
	seq atomic.Int64
}

// diskOf is the disk of writer w's k-th op: writers are spread over the
// disks, each cycling through its own share of them (every writer shares
// the one disk when there is one).
func (f *fixture) diskOf(w, k int) int { return (w + k*f.writers) % f.disks }

// replicaName is the request key writer w owns on disk d.
func replicaName(w, d int) string { return fmt.Sprintf("w%d-d%d", w, d) }

// setUp creates the fixture's objects once; later runs of the same shape
// reuse them.
func (f *fixture) setUp(ctx context.Context) error {
	if f.ready {
		return nil
	}
	base := fmt.Sprintf("bench-d%d-w%d", f.disks, f.writers)
	f.rawNS, f.ledgerNS = base+"-raw", base+"-ledger"
	for _, ns := range []string{f.rawNS, f.ledgerNS} {
		if err := env.CreateNamespace(ctx, ns); err != nil {
			return fmt.Errorf("creating namespace %s: %w", ns, err)
		}
	}

	// Writers stand in for many controllers across a cluster: no
	// client-side rate limit, each with its own client.
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = -1, 0
	for range f.writers {
		c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
		if err != nil {
			return fmt.Errorf("creating a writer's client: %w", err)
		}
		f.clients = append(f.clients, c)
	}

	for d := range f.disks {
		ds := &longhornv1.DiskSchedule{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-disk-%d", base, d), Namespace: f.rawNS},
			Spec:       longhornv1.DiskScheduleSpec{Name: fmt.Sprintf("disk-%d", d), NodeID: base + "-raw-node"},
		}
		if err := env.Client.Create(ctx, ds); err != nil {
			return fmt.Errorf("creating raw DiskSchedule %s: %w", ds.Name, err)
		}
		f.rawDisks = append(f.rawDisks, ds.Name)
	}

	// The requests name no Longhorn object; a mirror grace period longer
	// than the benchmark keeps them for the ledger to decide.
	m, err := managertest.Start(env, env.Config, manager.Options{Namespace: f.ledgerNS, LedgerWorkers: 4, GateGrace: time.Hour})
	if err != nil {
		return fmt.Errorf("starting the manager: %w", err)
	}
	f.manager = m
	var fixtures []testenv.NodeFixture
	for n := 0; n*disksPerNode < f.disks; n++ {
		nf := testenv.NodeFixture{Name: fmt.Sprintf("%s-node-%d", base, n), Disks: map[string]testenv.Disk{}}
		for d := n * disksPerNode; d < min((n+1)*disksPerNode, f.disks); d++ {
			nf.Disks[fmt.Sprintf("disk-%d", d)] = testenv.Disk{UUID: fmt.Sprintf("%s-disk-%d", base, d), Size: diskSize}
		}
		if err := nf.CreateNode(ctx, env.Client, f.ledgerNS); err != nil {
			return fmt.Errorf("creating node %s: %w", nf.Name, err)
		}
		fixtures = append(fixtures, nf)
	}
	// Disk d's UUID is base-disk-d; index the ledgers by disk number.
	for d := range f.disks {
		f.ledgerDisks = append(f.ledgerDisks, fmt.Sprintf("%s-disk-%d", base, d))
	}
	if got := len(testenv.DiskUUIDs(fixtures...)); got != f.disks {
		return fmt.Errorf("the node fixtures hold %d disks, want %d", got, f.disks)
	}
	if err := f.startTracker(ctx); err != nil {
		return err
	}
	if err := f.waitReady(ctx); err != nil {
		return err
	}
	f.ready = true
	return nil
}

// startTracker starts a shared informer on the ledger namespace's
// DiskSchedules, as a requester's controller would watch them.
func (f *fixture) startTracker(ctx context.Context) error {
	f.tracker = benchutil.NewTracker(false)
	stop, err := f.tracker.Track(ctx, env.Config, env.Scheme, f.ledgerNS, map[client.Object]func(any){
		&lhv1.Node{}: func(obj any) {
			if _, ok := obj.(*lhv1.Node); ok {
				f.nodeWrites.Add(1)
			}
		},
	})
	if err != nil {
		return err
	}
	f.stopCache = stop
	return nil
}

// waitReady waits until every ledger of the fixture is Ready with its limit.
func (f *fixture) waitReady(ctx context.Context) error {
	last, err := testenv.Poll(ctx, 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		for _, name := range f.ledgerDisks {
			ds := &longhornv1.DiskSchedule{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.ledgerNS, Name: name}, ds); err != nil {
				return false, name + " not found", client.IgnoreNotFound(err)
			}
			if !meta.IsStatusConditionTrue(ds.Status.Conditions, longhornv1.DiskScheduleConditionReady) || ds.Status.StorageLimit <= 0 {
				return false, testenv.DescribeLedger(ds), nil
			}
		}
		return true, "", nil
	}, testenv.Every(100*time.Millisecond))
	if err != nil {
		return fmt.Errorf("waiting for %d Ready ledgers (last seen: %s): %w", f.disks, last, err)
	}
	return nil
}

// close stops the fixture's manager and informer.
func (f *fixture) close() error {
	if f.stopCache != nil {
		f.stopCache()
	}
	if f.manager != nil {
		return f.manager.Stop()
	}
	return nil
}

// figures summarises one measured phase.
type figures struct {
	ops       int
	elapsed   time.Duration
	p50, p99  time.Duration
	conflicts int
}

func (f figures) rate() float64 { return float64(f.ops) / f.elapsed.Seconds() }

func (f figures) conflictsPerOp() float64 { return float64(f.conflicts) / float64(f.ops) }

// op is one measured operation of writer w, its k-th; it returns its
// latency and how many of its writes conflicted.
type op func(ctx context.Context, w, k int) (time.Duration, int, error)

// run has the fixture's writers perform n ops in all, concurrently, each
// writer one op at a time, and summarises them.
func (f *fixture) run(ctx context.Context, n int, do op) (figures, error) {
	ctx, cancel := context.WithTimeout(ctx, phaseTimeout)
	defer cancel()
	var (
		next      atomic.Int64
		wg        sync.WaitGroup
		latencies = make([][]time.Duration, f.writers)
		conflicts = make([]int, f.writers)
		errs      = make([]error, f.writers)
	)
	start := time.Now()
	for w := range f.writers {
		wg.Go(func() {
			for k := 0; next.Add(1) <= int64(n); k++ {
				d, c, err := do(ctx, w, k)
				if err != nil {
					errs[w] = fmt.Errorf("writer %d: %w", w, err)
					cancel()
					return
				}
				latencies[w] = append(latencies[w], d)
				conflicts[w] += c
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return figures{}, err
	}
	all := slices.Concat(latencies...)
	slices.Sort(all)
	fig := figures{ops: n, elapsed: elapsed, p50: benchutil.Percentile(all, 0.50), p99: benchutil.Percentile(all, 0.99)}
	for _, c := range conflicts {
		fig.conflicts += c
	}
	return fig, nil
}

// nextSize returns a request size never written before by this fixture.
func (f *fixture) nextSize() int64 { return requestSize + f.seq.Add(1) }

// rawStatusOp writes writer w's entry in a raw DiskSchedule's status, as the
// ledger's controller writes its decisions, through the same read-modify-
// write loop requesters use for the spec (ledgerclient.Mutate: read the
// latest version, Update with its resourceVersion, retry on conflict), only
// against the status subresource.
func (f *fixture) rawStatusOp(ctx context.Context, w, k int) (time.Duration, int, error) {
	d := f.diskOf(w, k)
	key := client.ObjectKey{Namespace: f.rawNS, Name: f.rawDisks[d]}
	name, size := replicaName(w, d), f.nextSize()
	c := f.clients[w]
	writer := &conflictCounter{Writer: statusWriter{Writer: c, status: c.Status()}}
	start := time.Now()
	_, err := ledgerclient.Mutate(ctx, c, writer, key, func(ds *longhornv1.DiskSchedule) bool {
		if ds.Status.Replicas == nil {
			ds.Status.Replicas = map[string]longhornv1.RequestStatus{}
		}
		ds.Status.Replicas[name] = longhornv1.RequestStatus{State: longhornv1.RequestStateScheduled, RequestedSize: size, ScheduledSize: size}
		return true
	})
	if err != nil {
		return 0, writer.conflicts, fmt.Errorf("updating the status of %s: %w", key.Name, err)
	}
	return time.Since(start), writer.conflicts, nil
}

// rawPatchOp merge-patches writer w's entry into a raw DiskSchedule's status
// without a resourceVersion: no read, one round trip, conflicts resolved by
// the API server itself. It measures how fast the API server commits writes
// to the same objects.
func (f *fixture) rawPatchOp(ctx context.Context, w, k int) (time.Duration, int, error) {
	d := f.diskOf(w, k)
	ds := &longhornv1.DiskSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: f.rawNS, Name: f.rawDisks[d]}}
	size := f.nextSize()
	body := fmt.Sprintf(`{"status":{"replicas":{%q:{"state":"scheduled","requestedSize":%d,"scheduledSize":%d}}}}`,
		replicaName(w, d), size, size)
	conflicts := 0
	start := time.Now()
	err := retry.OnError(patchBackoff, apierrors.IsConflict, func() error {
		err := f.clients[w].Status().Patch(ctx, ds, client.RawPatch(types.MergePatchType, []byte(body)))
		if apierrors.IsConflict(err) {
			conflicts++
		}
		return err
	})
	if err != nil {
		return 0, conflicts, fmt.Errorf("patching the status of %s: %w", ds.Name, err)
	}
	return time.Since(start), conflicts, nil
}

// patchBackoff retries a status patch the API server gave up on: it retries
// a conflicting patch itself only a few times, which 32 writers on one
// object exceed. Its steps are ledgerclient's conflict backoff.
var patchBackoff = wait.Backoff{Steps: 200, Duration: 5 * time.Millisecond, Factor: 1, Jitter: 2}

// rawSpecOp writes a request into a raw DiskSchedule's spec, where no
// controller decides it: the requester's half of a ledger op.
func (f *fixture) rawSpecOp(ctx context.Context, w, k int) (time.Duration, int, error) {
	d := f.diskOf(w, k)
	key := client.ObjectKey{Namespace: f.rawNS, Name: f.rawDisks[d]}
	start := time.Now()
	_, conflicts, err := f.request(ctx, w, key, replicaName(w, d), f.nextSize())
	if err != nil {
		return 0, conflicts, err
	}
	return time.Since(start), conflicts, nil
}

// ledgerOp writes a request into a ledger and waits until the shared
// informer sees it decided; the latency runs from before the write's first
// read to the informer's event.
func (f *fixture) ledgerOp(ctx context.Context, w, k int) (time.Duration, int, error) {
	d := f.diskOf(w, k)
	key := client.ObjectKey{Namespace: f.ledgerNS, Name: f.ledgerDisks[d]}
	name, size := replicaName(w, d), f.nextSize()
	start := time.Now()
	generation, conflicts, err := f.request(ctx, w, key, name, size)
	if err != nil {
		return 0, conflicts, err
	}
	decided, err := f.tracker.Await(ctx, key.Name, name, size, generation)
	if err != nil {
		return 0, conflicts, fmt.Errorf("waiting for the decision on %s/%s at %d bytes: %w", key.Name, name, size, err)
	}
	return decided.Sub(start), conflicts, nil
}

// request writes spec.replicas[name] = size on the DiskSchedule key as every
// requester of the project does, through ledgerclient. It returns the
// generation the write produced and how many attempts conflicted.
func (f *fixture) request(ctx context.Context, w int, key client.ObjectKey, name string, size int64) (int64, int, error) {
	c := f.clients[w]
	writer := &conflictCounter{Writer: c}
	ds, err := ledgerclient.Mutate(ctx, c, writer, key, requirement.Write(requirement.Request{Kind: ledger.Replica, Name: name, Size: size}))
	if err != nil {
		return 0, writer.conflicts, err
	}
	return ds.Generation, writer.conflicts, nil
}

// conflictCounter counts the Updates that fail with a conflict.
type conflictCounter struct {
	client.Writer
	conflicts int
}

func (c *conflictCounter) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	err := c.Writer.Update(ctx, obj, opts...)
	if apierrors.IsConflict(err) {
		c.conflicts++
	}
	return err
}

// statusWriter sends Update to the status subresource.
type statusWriter struct {
	client.Writer
	status client.SubResourceWriter
}

func (s statusWriter) Update(ctx context.Context, obj client.Object, _ ...client.UpdateOption) error {
	return s.status.Update(ctx, obj)
}
