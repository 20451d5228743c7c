// Package schedulerbench measures a real kube-scheduler's throughput, in
// pods per second, with and without the diskschedule extender, in one run.
// The sandbox runs etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler (configured with the extender) as processes, the manager
// in-process, and Longhorn v1.12.0's own control plane: sandbox-longhorn,
// a process of its own with one longhorn-manager per node (each with its
// own datastore and controller ID) and Longhorn's admission webhooks, on
// the simulated data plane (an instance manager per node answering
// Longhorn's gRPC API); the test process also runs the simulated CSI
// driver and kubelets. The topology has -schedulerbench.nodes nodes (10 by
// default) with one 10Ti disk each, and each phase 10 pods per node
// (-schedulerbench.pods), each using its own 1Gi claim of the Longhorn
// StorageClass (one replica, best-effort data locality). Longhorn creates a
// claim's volume when it is provisioned and places nothing of it until it
// attaches: once the pod is bound, the volume is attached through
// Longhorn's VolumeManager, as its CSI driver's ControllerPublishVolume
// does, and Longhorn's volume controller then places the replica on the
// pod's node (data locality), through the admission gate, which hands the
// pod's reservation over to it.
//
// In one phase the pods request the longhorn.io/scheduler-extender
// resource, so kube-scheduler calls the extender for each (filter and
// prioritize; the pod's reservation is then written to the ledger of the
// node it was bound to); in the other they do not, and kube-scheduler never
// calls it. In each phase the pods are created while kube-scheduler is
// paused, and the clock runs from resuming it until the last pod is bound.
// The phase's pods then run (Longhorn attaches every volume), the benchmark
// reports where Longhorn put the replicas and what the ledgers decided on
// the reservations, and the phase's pods and claims are deleted until
// Longhorn has deleted their volumes, so that the next phase starts on an
// idle Longhorn.
//
// The default size is what sandbox-longhorn keeps up with on the 2-core
// machine the figures come from: each longhorn-manager's datastore sees
// every event, so its work grows with nodes × volumes. With 100 nodes (the
// size of earlier runs on the simulated Longhorn) a phase of 200 pods did
// not finish in 16 minutes, and with 15 or 20 nodes the second phase did
// not finish in the run's first 15 minutes (Longhorn's webhooks timing out
// once the first phase's volumes were attached); see docs/benchmarks.md.
//
// It holds only benchmarks; the sandbox starts inside the benchmark, so
// `go test ./...` starts nothing. Figures and the command are in
// docs/benchmarks.md.
package schedulerbench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/longhorn/diskschedule/internal/manager"
	"github.com/longhorn/diskschedule/internal/podmutator"
	"github.com/longhorn/diskschedule/test/framework/testenv"
	"github.com/longhorn/diskschedule/test/framework/testenv/sandboxtest"
	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
)

const (
	diskSize  = "10Ti"
	claimSize = "1Gi"
	// podsPerNode is the default number of pods per node in each phase.
	podsPerNode = 10
	// workers create claims and pods in parallel.
	workers = 16
)

var (
	nodeCount    = flag.Int("schedulerbench.nodes", 10, "Nodes of the sandbox, each with one 10Ti disk and its own longhorn-manager.")
	podCount     = flag.Int("schedulerbench.pods", 0, "Pods (each with its own claim) scheduled in each phase; 0 is 10 per node.")
	logDir       = flag.String("schedulerbench.logs", "", "Keep the sandbox's logs (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, sandbox-longhorn) in this directory (default: discard them).")
	phaseTimeout = flag.Duration("schedulerbench.timeout", 10*time.Minute, "How long a phase's pods may take to be bound.")
	phaseNames   = flag.String("schedulerbench.phases", "with-extender,plugin,without-extender", "The phases to run, in this order (a subset of with-extender, plugin, without-extender); a ratio is reported only when its phases ran.")
	cpuProfile   = flag.String("schedulerbench.cpuprofile", "", "Write a CPU profile of this process (the manager, the simulated CSI driver and kubelets) while each phase's pods are scheduled, to <dir>/<phase>.pprof, and what it allocated meanwhile (<dir>/<phase>-allocs.pprof, from <dir>/<phase>-allocs-start.pprof).")
)

// TestMain discards the in-process controllers' logs when benchmarks run,
// to keep the figures readable; without -bench it only runs the (no) tests.
func TestMain(m *testing.M) {
	flag.Parse()
	testenv.QuietBenchmarks()
	os.Exit(m.Run())
}

// BenchmarkKubeSchedulerThroughput reports the throughput of the same
// number of pods through kube-scheduler with the extender, through the
// second scheduler (kube-scheduler with the diskschedule plugin compiled
// in) and through kube-scheduler alone, and the ratios to the last
// (with/without, plugin/without). Each phase's claims are provisioned
// first; its pods are then created while the scheduler that places them
// is paused (SIGSTOP), and the time is measured from resuming it (SIGCONT)
// until the last pod has spec.nodeName, so that the figure is the
// scheduler's and not the pod creation rate. The phase's
// pods all run (volumes attached, replicas granted and started), and are
// then deleted with their claims until Longhorn has deleted their volumes,
// before the next phase: one phase's data plane work (Longhorn's engine
// monitors poll every attached volume) neither overlaps the other's
// measurement nor leaves it a busier sandbox. The extender phase runs first: the manager's work per pod
// grows with the number of volumes in the cluster, kube-scheduler's much
// less, so each phase starts from an empty cluster as far as its own cost
// is concerned.
func BenchmarkKubeSchedulerThroughput(b *testing.B) {
	b.StopTimer()
	ctx := context.Background()
	sb, c, metricsURL := startSandbox(b)
	schedulers := map[string]int{}
	for _, p := range sb.Processes() {
		schedulers[p.Name] = p.PID
	}
	for _, name := range []string{"kube-scheduler", secondaryProcess} {
		if schedulers[name] == 0 {
			b.Fatalf("the sandbox runs no %s", name)
		}
	}

	n := phasePods()
	var without, with, plugin []time.Duration
	var ext extenderTimes
	// CPU seconds of every process together in each op while the pods
	// were scheduled, by phase.
	windowCPU := map[string][]float64{}
	for i := range b.N {
		for _, phase := range []struct {
			kind      podKind
			name      string
			scheduler string
			out       *[]time.Duration
		}{
			{throughExtender, "with-extender", "kube-scheduler", &with},
			{throughPlugin, "plugin", secondaryProcess, &plugin},
			{plain, "without-extender", "kube-scheduler", &without},
		} {
			if !selected(phase.name) {
				continue
			}
			ns := fmt.Sprintf("%s-%d", phase.name, i)
			report(b, "%s: before it, the ledgers: %s", ns, describeLedgers(b, ctx, c))
			before := readExtenderTimes(b, metricsURL)
			res := runPhase(b, ctx, sb, c, schedulers[phase.scheduler], ns, phase.kind, n)
			*phase.out = append(*phase.out, res.elapsed)
			windowCPU[phase.name] = append(windowCPU[phase.name], res.cpu.total())
			phaseTimes := readExtenderTimes(b, metricsURL).sub(before)
			if phase.kind == throughExtender {
				ext = ext.add(phaseTimes)
				report(b, "%s: reservations by result, until its pods ran: %s", ns, phaseTimes.describeReservations())
			}
			report(b, "%s: the ledger controller's status writes by result, until its pods ran: %s", ns, phaseTimes.describeStatusWrites())
			report(b, "%s: %d pods bound in %s (%.1f pods/s) once kube-scheduler resumed; creating them took %s, then %s until the sandbox was idle; while scheduling: %s",
				ns, n, res.elapsed.Round(time.Millisecond), float64(n)/res.elapsed.Seconds(), res.created.Round(time.Millisecond), res.settled.Round(time.Second),
				res.cpu.describe(res.elapsed, runtime.NumCPU()))
			report(b, "%s: kube-apiserver served, while scheduling: %s", ns, res.api.describe(16))
			report(b, "%s: time in API Priority and Fairness's queues, by priority level, while scheduling: %s", ns, res.api.describeWaits())
			report(b, "%s: the pods ran %s after the last was bound; Longhorn's replicas %s later: %s", ns, res.ran.Round(100*time.Millisecond),
				res.ledgersSettled.Round(time.Second), describeCounts(res.placed))
			report(b, "%s: from resuming the scheduler until then: %s", ns, res.cpuToSettle.describe(res.toSettle, runtime.NumCPU()))
			if phase.kind != plain {
				report(b, "%s: the ledgers' reservations, as last seen from the end of the window on: %s", ns, describeCounts(res.reservations))
			}
			removed := removePhase(b, ctx, sb, c, ns)
			report(b, "%s: its pods and claims deleted and Longhorn's volumes gone after %s", ns, removed.Round(time.Second))
		}
		// A single op varies with the machine's load; each op's own ratio
		// shows how much.
		if len(without) > i && len(with) > i {
			report(b, "op %d: with ÷ without the extender = %.2f", i, without[i].Seconds()/with[i].Seconds())
		}
		if len(without) > i && len(plugin) > i {
			report(b, "op %d: the plugin build ÷ without = %.2f", i, without[i].Seconds()/plugin[i].Seconds())
		}
	}
	select {
	case <-sb.Done():
		b.Fatalf("a component of the sandbox stopped on its own: %v", sb.Err())
	default:
	}
	// Only the window's CPU is compared: from the window's end until the
	// pods run, Longhorn's attach of the phase's volumes uses tens of
	// CPU-seconds that vary from phase to phase by more than the whole
	// scheduling cost (each phase reports it).
	for _, name := range []string{"with-extender", "plugin"} {
		if added := addedPerPod(windowCPU[name], windowCPU["without-extender"], n); added != "" {
			report(b, "%s: CPU of every process added per pod against without-extender, while scheduling: %s", name, added)
		}
	}
	rateWithout, rateWith, ratePlugin := rate(n, without), rate(n, with), rate(n, plugin)
	for _, m := range []struct {
		value float64
		unit  string
	}{
		{rateWithout, "pods/s-without-extender"}, {rateWith, "pods/s-with-extender"}, {ratePlugin, "pods/s-plugin"},
		{rateWith / rateWithout, "with/without"}, {ratePlugin / rateWithout, "plugin/without"},
	} {
		if m.value > 0 && !math.IsInf(m.value, 0) && !math.IsNaN(m.value) {
			b.ReportMetric(m.value, m.unit)
		}
	}
	b.ReportMetric(float64(n), "pods")
	b.ReportMetric(float64(*nodeCount), "nodes")
	// Where an extender pod's time goes, as the extender's own histograms
	// say: the filter call (which includes any wait for pods in flight to
	// leave room), the wait for the pod's binding, and the ledger's decision
	// on its reservation.
	b.ReportMetric(ext.mean(ext.filter), "filter-ms")
	b.ReportMetric(ext.mean(ext.bindingWait), "binding-wait-ms")
	b.ReportMetric(ext.mean(ext.reservation), "reservation-ms")
	report(b, "extender: %.0f filter calls, %.0f pods followed to their node, %.0f reservations decided",
		ext.filter.count, ext.bindingWait.count, ext.reservation.count)
}

// histogram is a Prometheus histogram's sum (seconds) and count.
type histogram struct{ sum, count float64 }

// extenderTimes are the extender's duration histograms, its reservations
// by result (longhorn_scheduler_extender_reservations_total), and the
// ledger controller's status writes by result
// (longhorn_diskschedule_status_writes_total).
type extenderTimes struct {
	filter, bindingWait, reservation histogram
	reservations, statusWrites       map[string]float64
}

// statusWriteResults are the results of the ledger controller's status writes.
var statusWriteResults = []string{"ok", "conflict", "error"}

// reservationResults are the results of reservations the benchmark reports.
var reservationResults = []string{"scheduled", "fulfilled", "expired", "refused", "rejected"}

func (e extenderTimes) add(o extenderTimes) extenderTimes {
	out := extenderTimes{
		filter:       histogram{e.filter.sum + o.filter.sum, e.filter.count + o.filter.count},
		bindingWait:  histogram{e.bindingWait.sum + o.bindingWait.sum, e.bindingWait.count + o.bindingWait.count},
		reservation:  histogram{e.reservation.sum + o.reservation.sum, e.reservation.count + o.reservation.count},
		reservations: map[string]float64{},
		statusWrites: map[string]float64{},
	}
	for _, r := range reservationResults {
		out.reservations[r] = e.reservations[r] + o.reservations[r]
	}
	for _, r := range statusWriteResults {
		out.statusWrites[r] = e.statusWrites[r] + o.statusWrites[r]
	}
	return out
}

func (e extenderTimes) sub(o extenderTimes) extenderTimes {
	neg := extenderTimes{
		filter:       histogram{-o.filter.sum, -o.filter.count},
		bindingWait:  histogram{-o.bindingWait.sum, -o.bindingWait.count},
		reservation:  histogram{-o.reservation.sum, -o.reservation.count},
		reservations: map[string]float64{},
		statusWrites: map[string]float64{},
	}
	for _, r := range reservationResults {
		neg.reservations[r] = -o.reservations[r]
	}
	for _, r := range statusWriteResults {
		neg.statusWrites[r] = -o.statusWrites[r]
	}
	return e.add(neg)
}

// describeStatusWrites lists the ledger controller's status writes by result.
func (e extenderTimes) describeStatusWrites() string {
	parts := make([]string, 0, len(statusWriteResults))
	for _, r := range statusWriteResults {
		parts = append(parts, fmt.Sprintf("%s %.0f", r, e.statusWrites[r]))
	}
	return strings.Join(parts, ", ")
}

// describeReservations lists the reservations by result.
func (e extenderTimes) describeReservations() string {
	parts := make([]string, 0, len(reservationResults))
	for _, r := range reservationResults {
		parts = append(parts, fmt.Sprintf("%s %.0f", r, e.reservations[r]))
	}
	return strings.Join(parts, ", ")
}

// mean returns h's mean in milliseconds, or 0.
func (extenderTimes) mean(h histogram) float64 {
	if h.count == 0 {
		return 0
	}
	return h.sum / h.count * 1000
}

// readExtenderTimes reads the extender's histograms from the manager's
// metrics endpoint.
func readExtenderTimes(b *testing.B, url string) extenderTimes {
	b.Helper()
	resp, err := http.Get(url)
	if err != nil {
		b.Fatalf("reading the manager's metrics: %v", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatalf("reading the manager's metrics: %v", err)
	}
	text := string(data)
	read := func(name, labels string) histogram {
		return histogram{sum: sample(text, name+"_sum"+labels), count: sample(text, name+"_count"+labels)}
	}
	out := extenderTimes{
		filter:       read("longhorn_scheduler_extender_filter_duration_seconds", ""),
		bindingWait:  read("longhorn_scheduler_extender_pod_scheduling_wait_duration_seconds", `{pod_scheduled="true"}`),
		reservation:  read("longhorn_scheduler_extender_node_reservation_duration_seconds", `{replicas_scheduled="true"}`),
		reservations: map[string]float64{},
		statusWrites: map[string]float64{},
	}
	for _, r := range reservationResults {
		out.reservations[r] = sample(text, fmt.Sprintf(`longhorn_scheduler_extender_reservations_total{result=%q}`, r))
	}
	for _, r := range statusWriteResults {
		out.statusWrites[r] = sample(text, fmt.Sprintf(`longhorn_diskschedule_status_writes_total{result=%q}`, r))
	}
	return out
}

// sample returns the value of the sample named series (name and labels, as
// exposed) in a text exposition, or 0 when there is none.
func sample(text, series string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return f
			}
		}
	}
	return 0
}

// startSandbox starts the sandbox with the extender on a generated
// topology of nodeCount nodes with one disk of diskSize each, and returns
// it, an administrator's client with rate limits that do not slow the
// benchmark's own calls, and the URL of its manager's metrics.
func startSandbox(b *testing.B) (*sandbox.Sandbox, client.WithWatch, string) {
	b.Helper()
	var topo strings.Builder
	topo.WriteString("nodes:\n")
	for i := range *nodeCount {
		fmt.Fprintf(&topo, "- name: node-%03d\n  disks: [{name: disk-1, size: %s}]\n", i+1, diskSize)
	}
	path := filepath.Join(b.TempDir(), "topology.yaml")
	if err := os.WriteFile(path, []byte(topo.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	t, err := sandbox.LoadTopology(path)
	if err != nil {
		b.Fatal(err)
	}
	var metricsURL string
	start := time.Now()
	sb := sandboxtest.Start(b, sandboxtest.Options{
		Sandbox: sandbox.Options{
			Topology: t,
			Extender: true,
			// The second scheduler, the plugin build, places the plugin
			// phase's pods.
			SecondaryScheduler: true,
			LogDir:             *logDir,
			ReadyTimeout:       5 * time.Minute,
			// The one manager, as the sandbox builds it, but for leader
			// election's timings: on a shared 2-core machine the Lease's
			// renewal may wait more than the default 10 s for a busy
			// kube-apiserver, and a manager that loses its lease stops the
			// sandbox. With one manager nothing waits for a lease to expire.
			Managers: []sandbox.ManagerHook{func(opts *manager.Options, _ *rest.Config) {
				metricsURL = "http://" + opts.MetricsBindAddress + "/metrics"
				opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = 90*time.Second, 60*time.Second, 5*time.Second
			}},
		},
		Timeout:     10 * time.Minute,
		DiscardLogs: true,
	})
	report(b, "the sandbox with %d nodes was ready in %s", *nodeCount, time.Since(start).Round(time.Second))
	cfg := sb.AdminConfig()
	cfg.QPS, cfg.Burst = 2000, 4000
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: sb.Scheme()})
	if err != nil {
		b.Fatal(err)
	}
	return sb, c, metricsURL
}

// phaseResult is what runPhase measured.
type phaseResult struct {
	// elapsed runs from resuming kube-scheduler until every pod is bound.
	elapsed time.Duration
	// created is how long creating the pods took.
	created time.Duration
	// settled is how long the sandbox took to go idle before the clock started.
	settled time.Duration
	// cpu is the CPU time each process used during elapsed.
	cpu cpuTimes
	// cpuToSettle is the CPU time each process used from the start of
	// elapsed until the pods ran and the ledgers settled, toSettle later.
	cpuToSettle cpuTimes
	toSettle    time.Duration
	// api is what kube-apiserver served during elapsed.
	api apiCounts
	// ran is how long the pods took to run once the last was bound:
	// Longhorn's attach of their volumes.
	ran time.Duration
	// placed counts where Longhorn's replicas of the phase's volumes are
	// once the pods run, and reservations what the ledgers last showed of
	// the phase's reservations (from the end of elapsed on); ledgersSettled
	// is how long after the pods ran both settled.
	placed, reservations map[string]int
	ledgersSettled       time.Duration
}

// runPhase provisions n claims in namespace ns, creates n pods of kind
// using them while the scheduler that places them (process scheduler) is
// paused, and measures the time from resuming it until every pod is bound.
// It returns once every pod runs.
func runPhase(b *testing.B, ctx context.Context, sb *sandbox.Sandbox, c client.WithWatch, scheduler int, ns string, kind podKind, n int) (res phaseResult) {
	b.Helper()
	provision(b, ctx, sb, c, ns, n, claimSize)

	// Follow the pods from before the first is created.
	list := &corev1.PodList{}
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	allBound := followBindings(watchCtx, c, ns, list.ResourceVersion, n)

	// kube-scheduler is paused while the pods are created, so that the
	// measurement is of scheduling, not of how fast pods can be created.
	if err := syscall.Kill(scheduler, syscall.SIGSTOP); err != nil {
		b.Fatalf("pausing kube-scheduler: %v", err)
	}
	resume := func() {
		if err := syscall.Kill(scheduler, syscall.SIGCONT); err != nil {
			b.Errorf("resuming kube-scheduler: %v", err)
		}
	}
	createStart := time.Now()
	err := parallel(n, func(i int) error { return c.Create(ctx, pod(ns, i, kind)) })
	res.created = time.Since(createStart)
	if err != nil {
		resume()
		b.Fatalf("creating the pods: %v", err)
	}
	// The provisioning's and the pods' creation's tail (Longhorn volumes
	// and replicas created, claims bound, pods admitted) must not run into
	// the measurement: start the clock on an idle machine.
	waited, usage, quiet, err := waitQuiet(ctx, sb, runtime.NumCPU(), 3*time.Minute)
	if err != nil {
		resume()
		b.Fatalf("waiting for the sandbox to go idle: %v", err)
	}
	if !quiet {
		report(b, "%s: the sandbox still used %.0f%% of the machine after %s; measuring anyway", ns, usage*100, waited.Round(time.Second))
	}
	res.settled = waited
	stopProfile := startProfile(b, ctx, sb, ns)
	cpuBefore, err := readCPU(sb)
	if err != nil {
		b.Fatal(err)
	}
	apiBefore, err := readAPICounts(ctx, sb.AdminConfig())
	if err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	start := time.Now()
	resume()
	select {
	case bound := <-allBound:
		if bound.err != nil {
			b.Fatalf("following the pods of %s: %v", ns, bound.err)
		}
		res.elapsed = bound.at.Sub(start)
		cpuAfter, err := readCPU(sb)
		if err != nil {
			b.Fatal(err)
		}
		res.cpu = cpuAfter.sub(cpuBefore)
		stopProfile()
		apiAfter, err := readAPICounts(ctx, sb.AdminConfig())
		if err != nil {
			b.Fatal(err)
		}
		res.api = apiAfter.sub(apiBefore)
	case <-sb.Done():
		b.Fatalf("a component of the sandbox stopped on its own while the pods of %s were scheduled: %v", ns, sb.Err())
	case <-time.After(*phaseTimeout):
		b.Fatalf("the %d pods of %s were not all bound within %s (-schedulerbench.timeout)", n, ns, *phaseTimeout)
	}
	b.StopTimer()

	// What Longhorn's controllers then do with the phase's volumes, and
	// what the ledgers decide on the reservations, is followed from here
	// on, so that the watch costs the measured window nothing.
	ledgers := followLedgers(watchCtx, b, c, ns)
	// Let Longhorn attach the volumes (its controllers place each replica
	// as the volume attaches) and the manager finish this phase before the
	// next.
	runStart := time.Now()
	waitFor(b, ctx, sb, 10*time.Minute, fmt.Sprintf("the %d pods of %s run", n, ns), func(ctx context.Context) (bool, string, error) {
		list := &corev1.PodList{}
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false, "", err
		}
		running := 0
		nodes := map[string]int{}
		for _, p := range list.Items {
			nodes[p.Spec.NodeName]++
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == n, fmt.Sprintf("%d running on %d nodes", running, len(nodes)), nil
	})
	res.ran = time.Since(runStart)
	res.placed, res.reservations, res.ledgersSettled = settleLonghorn(ctx, b, c, ledgers, ns, 3*time.Minute)
	cpuEnd, err := readCPU(sb)
	if err != nil {
		b.Fatal(err)
	}
	res.cpuToSettle, res.toSettle = cpuEnd.sub(cpuBefore), time.Since(start)
	return res
}

// startProfile starts a CPU profile of this process into
// -schedulerbench.cpuprofile's directory, named after phase, one of
// kube-apiserver for the phase's first 4 seconds (its /debug/pprof, into
// <phase>-kube-apiserver.pprof), and records lock contention; it returns
// the function that stops them and writes <phase>-mutex.pprof. The
// process's allocations so far are written to <phase>-allocs-start.pprof
// now and to <phase>-allocs.pprof then: what the phase allocated is their
// difference (go tool pprof -diff_base). Without the flag it does nothing.
func startProfile(b *testing.B, ctx context.Context, sb *sandbox.Sandbox, phase string) (stop func()) {
	b.Helper()
	if *cpuProfile == "" {
		return func() {}
	}
	if err := os.MkdirAll(*cpuProfile, 0o755); err != nil {
		b.Fatal(err)
	}
	writeProfile(b, "allocs", filepath.Join(*cpuProfile, phase+"-allocs-start.pprof"))
	f, err := os.Create(filepath.Join(*cpuProfile, phase+".pprof"))
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatalf("starting a CPU profile (is -test.cpuprofile set too?): %v", err)
	}
	apiserver := make(chan error, 1)
	go func() {
		rc, err := rest.RESTClientFor(withCodecs(sb.AdminConfig()))
		if err != nil {
			apiserver <- err
			return
		}
		data, err := rc.Get().AbsPath("/debug/pprof/profile").Param("seconds", "4").DoRaw(ctx)
		if err != nil {
			apiserver <- fmt.Errorf("profiling kube-apiserver: %w", err)
			return
		}
		apiserver <- os.WriteFile(filepath.Join(*cpuProfile, phase+"-kube-apiserver.pprof"), data, 0o644)
	}()
	// Contention on locks, from the phase's start: <phase>-mutex.pprof.
	runtime.SetMutexProfileFraction(1)
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Error(err)
		}
		writeProfile(b, "mutex", filepath.Join(*cpuProfile, phase+"-mutex.pprof"))
		writeProfile(b, "allocs", filepath.Join(*cpuProfile, phase+"-allocs.pprof"))
		runtime.SetMutexProfileFraction(0)
		if err := <-apiserver; err != nil {
			b.Error(err)
		}
	}
}

// provision creates namespace ns with n claims of size and waits until
// the PV controller has bound them all.
func provision(b *testing.B, ctx context.Context, sb *sandbox.Sandbox, c client.Client, ns string, n int, size string) {
	b.Helper()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	if err := parallel(n, func(i int) error { return c.Create(ctx, claim(ns, i, size)) }); err != nil {
		b.Fatalf("creating the claims: %v", err)
	}
	waitFor(b, ctx, sb, 10*time.Minute, fmt.Sprintf("the %d claims of %s are bound", n, ns), func(ctx context.Context) (bool, string, error) {
		list := &corev1.PersistentVolumeClaimList{}
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false, "", err
		}
		bound := 0
		for _, pvc := range list.Items {
			if pvc.Status.Phase == corev1.ClaimBound {
				bound++
			}
		}
		return bound == n, fmt.Sprintf("%d bound", bound), nil
	})
}

// bindings is when the last pod was seen bound, or why it was not.
type bindings struct {
	at  time.Time
	err error
}

// followBindings watches the pods of ns from resourceVersion rv, watching
// again from where it stopped when the API server ends the watch, and
// reports when n pods have been seen with spec.nodeName.
func followBindings(ctx context.Context, c client.WithWatch, ns, rv string, n int) <-chan bindings {
	out := make(chan bindings, 1)
	go func() {
		bound := map[string]bool{}
		for ctx.Err() == nil {
			w, err := c.Watch(ctx, &corev1.PodList{}, &client.ListOptions{Namespace: ns, Raw: &metav1.ListOptions{ResourceVersion: rv}})
			if err != nil {
				out <- bindings{err: fmt.Errorf("watching from resourceVersion %s: %w", rv, err)}
				return
			}
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error {
					w.Stop()
					out <- bindings{err: fmt.Errorf("watching from resourceVersion %s: %v", rv, ev.Object)}
					return
				}
				p, ok := ev.Object.(*corev1.Pod)
				if !ok {
					continue
				}
				rv = p.ResourceVersion
				if p.Spec.NodeName != "" {
					bound[p.Name] = true
				}
				if len(bound) == n {
					w.Stop()
					out <- bindings{at: time.Now()}
					return
				}
			}
			w.Stop()
		}
	}()
	return out
}

// addedPerPod says how many milliseconds of CPU per pod a phase used more
// than the phase without the extender, op by op (ops paired in order) and
// as their mean, min and max; "" when either phase did not run.
func addedPerPod(phase, without []float64, pods int) string {
	k := min(len(phase), len(without))
	if k == 0 {
		return ""
	}
	var parts []string
	var sum, lo, hi float64
	for i := range k {
		ms := 1000 * (phase[i] - without[i]) / float64(pods)
		parts = append(parts, fmt.Sprintf("%.1f", ms))
		sum += ms
		if i == 0 || ms < lo {
			lo = ms
		}
		if i == 0 || ms > hi {
			hi = ms
		}
	}
	return fmt.Sprintf("%.1f ms on average over %d ops (min %.1f, max %.1f; by op %s)", sum/float64(k), k, lo, hi, strings.Join(parts, ", "))
}

// selected reports whether -schedulerbench.phases names phase.
func selected(phase string) bool {
	return slices.Contains(strings.Split(*phaseNames, ","), phase)
}

// rate is pods per second over all phases measured, of n pods each; 0
// when none was.
func rate(n int, ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	var total time.Duration
	for _, d := range ds {
		total += d
	}
	return float64(n*len(ds)) / total.Seconds()
}

// phasePods is the number of pods of each phase: -schedulerbench.pods, or
// podsPerNode on each node.
func phasePods() int {
	if *podCount > 0 {
		return *podCount
	}
	return podsPerNode * *nodeCount
}

// claim returns the i-th claim of ns, of size.
func claim(ns string, i int, size string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("data-%04d", i), Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(sandbox.StorageClassName),
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: resource.MustParse(size),
			}},
		},
	}
}

// podKind is who places a phase's pods.
type podKind int

const (
	// plain pods are placed by kube-scheduler alone.
	plain podKind = iota
	// throughExtender pods request the resource that makes kube-scheduler
	// call the extender.
	throughExtender
	// throughPlugin pods name the second scheduler, kube-scheduler with the
	// diskschedule plugin compiled in.
	throughPlugin
)

// secondaryProcess is the sandbox's name of the second scheduler's process.
const secondaryProcess = "diskschedule-scheduler"

// pod returns the i-th pod of ns, using the i-th claim, placed as kind
// says.
func pod(ns string, i int, kind podKind) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%04d", i), Namespace: ns},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "app", Image: "busybox",
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: fmt.Sprintf("data-%04d", i)},
			}}},
		},
	}
	switch kind {
	case throughExtender:
		one := corev1.ResourceList{podmutator.ExtendedResource: resource.MustParse("1")}
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: one, Limits: one}
	case throughPlugin:
		p.Spec.SchedulerName = podmutator.SchedulerName
	}
	return p
}

// parallel runs do for 0..n-1 on workers goroutines and returns the first
// error and how many calls failed.
func parallel(n int, do func(i int) error) error {
	next := make(chan int)
	var mu sync.Mutex
	var first error
	failed := 0
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := do(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					failed++
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if first != nil {
		return fmt.Errorf("%d of %d failed, the first with: %w", failed, n, first)
	}
	return nil
}

// waitFor polls check every 500ms until it is done or timeout passes, or
// a component of the sandbox stops on its own.
func waitFor(b *testing.B, ctx context.Context, sb *sandbox.Sandbox, timeout time.Duration, what string, check func(ctx context.Context) (bool, string, error)) {
	b.Helper()
	testenv.Eventually(b, ctx, timeout, what, func(ctx context.Context) (bool, string, error) {
		if err := sb.Err(); err != nil {
			return false, "", fmt.Errorf("a component of the sandbox stopped on its own: %w", err)
		}
		return check(ctx)
	}, testenv.Every(500*time.Millisecond))
}

// writeProfile writes the runtime profile name to path.
func writeProfile(b *testing.B, name, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Error(err)
		return
	}
	defer f.Close()
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		b.Error(err)
	}
}

// report prints one line of a benchmark's figures to standard output as it
// is measured: the testing package keeps only the first ten lines a
// benchmark logs, and a run of several ops logs more.
func report(b *testing.B, format string, args ...any) {
	b.Helper()
	fmt.Printf("%s: %s\n", b.Name(), fmt.Sprintf(format, args...))
}

// removePhase deletes the pods and claims of ns and waits until Longhorn has
// deleted their volumes (the claims' reclaim policy is Delete, and Longhorn's
// CSI driver deletes each volume through Longhorn's API); it returns how long
// that took.
func removePhase(b *testing.B, ctx context.Context, sb *sandbox.Sandbox, c client.Client, ns string) time.Duration {
	b.Helper()
	start := time.Now()
	volumes, err := phaseVolumes(ctx, c, ns)
	if err != nil {
		b.Fatal(err)
	}
	if err := c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.GracePeriodSeconds(0)); err != nil {
		b.Fatalf("deleting the pods of %s: %v", ns, err)
	}
	if err := c.DeleteAllOf(ctx, &corev1.PersistentVolumeClaim{}, client.InNamespace(ns)); err != nil {
		b.Fatalf("deleting the claims of %s: %v", ns, err)
	}
	waitFor(b, ctx, sb, 10*time.Minute, "the volumes of "+ns+" deleted", func(ctx context.Context) (bool, string, error) {
		left := 0
		for v := range volumes {
			err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: v}, &lhv1.Volume{})
			if err == nil {
				left++
			} else if !apierrors.IsNotFound(err) {
				return false, "", err
			}
		}
		return left == 0, fmt.Sprintf("%d of %d volumes left", left, len(volumes)), nil
	})
	return time.Since(start)
}
