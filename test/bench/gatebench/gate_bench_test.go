package gatebench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"

	"github.com/longhorn/diskschedule/test/bench/benchutil"
	"github.com/longhorn/diskschedule/test/framework/testenv/replicawriter"
)

// BenchmarkReplicaScheduling measures, in one run, Longhorn's replica
// scheduling writes through the admission gate and the same writes with the
// gate not registered, for 1 disk (every write to one disk: one ledger
// takes every request) and 64 disks (writes spread over 8 nodes × 8 disks).
//
// Two sandboxes of the same topology run side by side: one with
// diskschedule-gate registered, one without (Longhorn as it is today; the
// mirror adopts each placement after it landed). The writers are Longhorn's
// own scheduler and datastore code: in each sandbox three longhorn-manager
// pods, each with its own datastore and replica scheduler, and
// -gatebench.writers volume-controller workers spread over them, each
// placing one replica at a time as longhorn-manager v1.12's volume
// controller does: the volume and its replicas from its pod's datastore,
// Longhorn's ScheduleReplica, and the datastore's UpdateReplica
// (replicawriter.Pod.Place). For b.N writes, b.N Volumes of 1Gi with one
// unscheduled Replica each are created first and waited for in every
// pod's datastore (not measured); the one-disk shape's volumes select
// node-1's disk-1 by its disk tag. Disks have room for every write, so
// none is refused for space; a write refused for another reason (the gate
// could not write the ledger or did not hear back in time) is retried as
// longhorn-manager retries it. A write's latency runs from its first
// scheduling attempt until the API server answered the write that placed
// it (the refusals before are counted); writes/s is the phase's, and also
// covers each worker's wait in UpdateReplica for its own cache to hold the
// write. Between phases the ledgers settle on what is persisted. ns/op
// covers the gated phase only; the figures, the ratios and where the gate's
// time goes are printed as Markdown tables. There are no thresholds.
func BenchmarkReplicaScheduling(b *testing.B) {
	if *writerCount < 1 {
		b.Fatalf("-gatebench.writers=%d: at least one writer is needed", *writerCount)
	}
	ctx := context.Background()
	fmt.Printf("load average at start: %s\n", benchutil.LoadAverage())
	bn := &bench{}
	for _, spec := range []struct {
		name string
		gate bool
		into **cluster
	}{{"gate", true, &bn.gated}, {"no gate", false, &bn.baseline}} {
		start := time.Now()
		c, err := startCluster(ctx, spec.name, spec.gate)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			if err := c.stop(); err != nil {
				b.Errorf("stopping the sandbox %s: %v", c.name, err)
			}
		})
		*spec.into = c
		fmt.Printf("sandbox %q ready in %s\n", spec.name, time.Since(start).Round(100*time.Millisecond))
	}
	var rows []result
	for _, disks := range []int{1, nodeCount * disksPerNode} {
		var last *result
		ok := b.Run(fmt.Sprintf("disks=%d", disks), func(b *testing.B) { last = bn.measure(b, disks) })
		if ok && last != nil {
			rows = append(rows, *last)
		}
	}
	if len(rows) > 0 {
		// Printed rather than logged: a parent benchmark's log is not shown.
		fmt.Print(table(rows, *writerCount))
	}
	fmt.Printf("load average at end: %s\n", benchutil.LoadAverage())
}

// bench is the benchmark's two sandboxes.
type bench struct {
	gated, baseline *cluster
	// runs numbers the measurements, so each run's objects get fresh names.
	runs int
	// firstDisk counts the replicas earlier runs placed on the first disk,
	// in each sandbox.
	firstDisk int
}

// result is one shape's figures from its last (full-size) run.
type result struct {
	disks          int
	gate, baseline figures
	// split is where the gated writes' time went, from the tracker.
	split split
	// stats is what the gate's own metrics say of the gated phase.
	stats gateStats
	// statusWrites counts the ledgers' status writes during the gated phase.
	statusWrites int
	// adoption is, without the gate, how long after a write returned its
	// disk's ledger showed it adopted (p50, p99).
	adoption [2]time.Duration
}

// measure runs one shape: b.N writes without the gate, then b.N with it.
func (bn *bench) measure(b *testing.B, disks int) *result {
	b.StopTimer()
	ctx := context.Background()
	onFirst := (b.N + disks - 1) / disks
	if bn.firstDisk+onFirst > maxPerDisk {
		b.Fatalf("%d writes on %d disks: the first disk would hold %d replicas, more than the %d this benchmark keeps under the ledger's bound of replica entries",
			b.N, disks, bn.firstDisk+onFirst, maxPerDisk)
	}
	defer func() { bn.firstDisk += onFirst }()
	bn.runs++
	prefix := fmt.Sprintf("gb%d", bn.runs)
	r := &result{disks: disks}

	base, err := phase(ctx, bn.baseline, prefix, disks, b.N, nil)
	if err != nil {
		b.Fatal(err)
	}
	r.baseline = base.figures
	r.adoption = base.adoption()

	before, err := readGateStats()
	if err != nil {
		b.Fatal(err)
	}
	writes := bn.gated.tracker.StatusWrites()
	b.ResetTimer()
	gated, err := phase(ctx, bn.gated, prefix, disks, b.N, b)
	if err != nil {
		b.Fatal(err)
	}
	after, err := readGateStats()
	if err != nil {
		b.Fatal(err)
	}
	r.gate, r.split, r.stats = gated.figures, gated.split(), after.since(before)
	r.statusWrites = bn.gated.tracker.StatusWrites() - writes
	if int(r.stats.admitted) < b.N {
		b.Errorf("the gate admitted %.0f of %d writes: it did not see them all", r.stats.admitted, b.N)
	}
	report(b, r)
	return r
}

// report records a shape's figures as the benchmark's metrics.
func report(b *testing.B, r *result) {
	b.ReportMetric(r.gate.rate(), "writes/s")
	b.ReportMetric(benchutil.Millis(r.gate.p50), "p50-ms")
	b.ReportMetric(benchutil.Millis(r.gate.p99), "p99-ms")
	b.ReportMetric(r.baseline.rate(), "no-gate-writes/s")
	b.ReportMetric(benchutil.Millis(r.baseline.p50), "no-gate-p50-ms")
	b.ReportMetric(benchutil.Millis(r.baseline.p99), "no-gate-p99-ms")
	b.ReportMetric(float64(r.gate.refused), "refused-writes")
	b.ReportMetric(r.gate.rate()/r.baseline.rate(), "rate-ratio")
	b.ReportMetric(benchutil.Ratio(r.gate.p50, r.baseline.p50), "p50-ratio")
	b.ReportMetric(benchutil.Ratio(r.gate.p99, r.baseline.p99), "p99-ratio")
}

// phaseRun is one measured phase: its writes and their figures.
type phaseRun struct {
	figures
	c      *cluster
	writes []write
}

// write is one measured placement: from its first scheduling attempt
// until the API server answered the write that placed it.
type write struct {
	replica    string
	start, end time.Time
	// refused counts the writes refused before.
	refused int
}

// phase prepares n replicas in c (of volumes selecting the one disk when
// disks is 1), places them with the writers, and waits for the ledgers to
// settle. With b, the benchmark's timer runs during the writes.
func phase(ctx context.Context, c *cluster, prefix string, disks, n int, b *testing.B) (*phaseRun, error) {
	var selector []string
	if disks == 1 {
		selector = []string{oneDiskTag}
	}
	reps, err := c.prepare(ctx, prefix, n, selector)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.name, err)
	}
	if err := c.settle(ctx); err != nil {
		return nil, err
	}
	if b != nil {
		b.StartTimer()
	}
	run, err := c.run(ctx, reps, disks == 1)
	if b != nil {
		b.StopTimer()
	}
	if err != nil {
		return nil, err
	}
	if err := c.settle(ctx); err != nil {
		return nil, err
	}
	return run, c.alive()
}

// run has the writers place reps, concurrently, each writer one replica at
// a time as a volume-controller worker of its longhorn-manager pod:
// Longhorn's ScheduleReplica and the datastore's UpdateReplica, refused
// writes retried as longhorn-manager does (replicawriter.Pod.Place). With
// oneDisk, every replica must land on the first disk.
func (c *cluster) run(ctx context.Context, reps []*lhv1.Replica, oneDisk bool) (*phaseRun, error) {
	ctx, cancel := context.WithTimeout(ctx, *phaseTimeout)
	defer cancel()
	var (
		next   atomic.Int64
		wg     sync.WaitGroup
		writes = make([]write, len(reps))
		errs   = make([]error, *writerCount)
	)
	start := time.Now()
	for w := range *writerCount {
		pod := c.pods[w%len(c.pods)]
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < len(reps); i = int(next.Add(1)) - 1 {
				rep := reps[i]
				out, err := pod.Place(ctx, rep.Spec.VolumeName, rep.Name, replicawriter.Options{
					Live: c.admin, Resync: replicawriter.LonghornResync, MaxRefusals: maxRefusals,
				})
				switch {
				case err != nil:
				case !out.Placed:
					err = fmt.Errorf("Longhorn's scheduler found no disk for replica %s", rep.Name)
				case oneDisk && out.DiskID != c.firstDisk:
					err = fmt.Errorf("replica %s of a volume selecting disk tag %s landed on disk %s", rep.Name, oneDiskTag, out.DiskID)
				}
				if err != nil {
					errs[w] = fmt.Errorf("%s: %w", c.name, err)
					cancel()
					return
				}
				writes[i] = write{replica: rep.Name, start: out.Start, end: out.Answered, refused: out.Refused}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	latencies := make([]time.Duration, len(writes))
	refused := 0
	for i, w := range writes {
		latencies[i] = w.end.Sub(w.start)
		refused += w.refused
	}
	f := summarize(latencies, elapsed)
	f.refused = refused
	return &phaseRun{figures: f, c: c, writes: writes}, nil
}

// figures summarises one measured phase.
type figures struct {
	ops            int
	elapsed        time.Duration
	p50, p99, mean time.Duration
	// refused counts the writes refused (and tried again) on the way.
	refused int
}

// summarize returns the figures of latencies measured over elapsed.
func summarize(latencies []time.Duration, elapsed time.Duration) figures {
	sorted := slices.Clone(latencies)
	slices.Sort(sorted)
	var sum time.Duration
	for _, d := range sorted {
		sum += d
	}
	f := figures{ops: len(sorted), elapsed: elapsed, p50: benchutil.Percentile(sorted, 0.50), p99: benchutil.Percentile(sorted, 0.99)}
	if len(sorted) > 0 {
		f.mean = sum / time.Duration(len(sorted))
	}
	return f
}

func (f figures) rate() float64 { return float64(f.ops) / f.elapsed.Seconds() }

// split is where a gated write's time went, as p50s of its three legs:
// from the write's start until the tracker saw its request in the ledger's
// spec (the API server calls the gate, which writes the request), from
// there until the tracker saw the decision (the DiskSchedule controller's
// informer, queue, decision batch and status write), and from there until
// the write returned (the gate's informer wakes the waiting request, the
// gate answers, the API server persists the replica). missing counts the
// writes whose request or decision the tracker did not see.
type split struct {
	request, decision, answer time.Duration
	missing                   int
}

// split computes the run's split from its cluster's tracker.
func (r *phaseRun) split() split {
	var request, decision, answer []time.Duration
	s := split{}
	for _, w := range r.writes {
		req, dec := r.c.tracker.Times(w.replica)
		if req.IsZero() || dec.IsZero() || dec.Before(req) {
			s.missing++
			continue
		}
		request = append(request, clamp(req.Sub(w.start)))
		decision = append(decision, dec.Sub(req))
		answer = append(answer, clamp(w.end.Sub(dec)))
	}
	s.request = summarize(request, 0).p50
	s.decision = summarize(decision, 0).p50
	s.answer = summarize(answer, 0).p50
	return s
}

// adoption returns, for a run without the gate, the p50 and p99 of how
// long after each write returned its ledger showed it decided (adopted by
// the mirror); a write not seen adopted counts as never.
func (r *phaseRun) adoption() [2]time.Duration {
	var lags []time.Duration
	for _, w := range r.writes {
		if _, dec := r.c.tracker.Times(w.replica); !dec.IsZero() {
			lags = append(lags, clamp(dec.Sub(w.end)))
		}
	}
	f := summarize(lags, 0)
	return [2]time.Duration{f.p50, f.p99}
}

// clamp returns d, or 0 when negative: two clocks' reads of one instant.
func clamp(d time.Duration) time.Duration { return max(d, 0) }

// table renders the results as two Markdown tables, ready for
// docs/benchmarks.md: the figures and ratios, and where the gate's time goes.
func table(rows []result, writers int) string {
	var sb strings.Builder
	sb.WriteString("\n| disks | writers | writes | gate: writes/s | gate: p50 / p99 ms | gate: writes refused, tried again | no gate: writes/s | no gate: p50 / p99 ms | writes/s gate ÷ no gate | p50 gate ÷ no gate | p99 gate ÷ no gate |\n")
	sb.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		fmt.Fprintf(&sb, "| %d | %d | %d | %.0f | %.1f / %.1f | %d | %.0f | %.1f / %.1f | %.2f | %.2f | %.2f |\n",
			r.disks, writers, r.gate.ops,
			r.gate.rate(), benchutil.Millis(r.gate.p50), benchutil.Millis(r.gate.p99), r.gate.refused,
			r.baseline.rate(), benchutil.Millis(r.baseline.p50), benchutil.Millis(r.baseline.p99),
			r.gate.rate()/r.baseline.rate(), benchutil.Ratio(r.gate.p50, r.baseline.p50), benchutil.Ratio(r.gate.p99, r.baseline.p99))
	}
	sb.WriteString("\n| disks | write → request in the ledger, p50 ms | request → decision, p50 ms | decision → write returns, p50 ms | mean write, gate / no gate, ms | mean in the gate's handler, ms | requests per gate ledger write (mean wait for the write ahead, ms) | decisions per ledger status write | gate's ledger-write conflicts per write | no gate: write → adopted by the mirror, p50 / p99 ms |\n")
	sb.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		perBatch, wait := r.stats.perBatch()
		fmt.Fprintf(&sb, "| %d | %.1f | %.1f | %.1f | %.1f / %.1f | %.1f | %.2f (%.1f) | %.2f | %.2f | %.0f / %.0f |\n",
			r.disks, benchutil.Millis(r.split.request), benchutil.Millis(r.split.decision), benchutil.Millis(r.split.answer),
			benchutil.Millis(r.gate.mean), benchutil.Millis(r.baseline.mean), r.stats.meanMillis(), perBatch, wait, perWrite(r.gate.ops, r.statusWrites),
			r.stats.conflicts/float64(r.gate.ops), benchutil.Millis(r.adoption[0]), benchutil.Millis(r.adoption[1]))
	}
	for _, r := range rows {
		if len(r.stats.refused) > 0 {
			fmt.Fprintf(&sb, "\n(disks=%d: the gate refused %s.)\n", r.disks, r.stats.refusals())
		}
		if r.split.missing > 0 {
			fmt.Fprintf(&sb, "\n(disks=%d: the tracker missed the request or decision of %d writes; the split leaves them out.)\n", r.disks, r.split.missing)
		}
	}
	return sb.String()
}

// perWrite is ops per status write, 0 without any.
func perWrite(ops, statusWrites int) float64 {
	if statusWrites == 0 {
		return 0
	}
	return float64(ops) / float64(statusWrites)
}

// refusals lists the gate's refusals by result: "3 undecided, 20 error".
func (s gateStats) refusals() string {
	results := slices.Sorted(maps.Keys(s.refused))
	parts := make([]string, 0, len(results))
	for _, result := range results {
		parts = append(parts, fmt.Sprintf("%.0f %s", s.refused[result], result))
	}
	return strings.Join(parts, ", ")
}

// meanMillis is the gate's mean time per answer, in milliseconds.
func (s gateStats) meanMillis() float64 {
	if s.answers == 0 {
		return 0
	}
	return 1000 * s.seconds / s.answers
}
