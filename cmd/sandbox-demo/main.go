// Command demo runs the Longhorn scheduler extender's test plan in the
// sandbox and prints what happened, with and without the extender, side by
// side: the race of sixteen pods for four disks, a pod with four claims,
// pods restarted and a node drained, and the race once more with its pods
// written without the extender's resource, opted in by their namespace and
// placed by a second scheduler. It also creates more claims than the
// disks hold at once, with the admission gate and without it (Longhorn as it
// is today), and prints how full each disk got either way; then has a pod
// write each of those volumes full, and prints which disks ran out of
// bytes, which replicas failed and which volumes faulted. It starts one
// sandbox per topology of config/sandbox in turn, and one more without the
// gate (real etcd, kube-apiserver, kube-controller-manager and kube-scheduler
// processes, the manager in-process, and longhorn-manager v1.12.0's own
// controllers in a process of their own on a simulated data plane), and
// stops each before the next. Run it from the repository's root (make demo);
// -scenarios runs only some scenarios, and starts only their sandboxes.
//
// It exits 0 when every scenario ran, whatever the pods did without the
// extender and the disks without the gate, and 1 when something broke: a
// wait timed out, a pod never ran, a ledger broke its rules, or a component
// failed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/longhorn/diskschedule/test/framework/scenario"
	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// options are the demo's flags.
type options struct {
	configDir string
	logDir    string
	timeout   time.Duration
	// scenarios are the scenarios to run, by name.
	scenarios map[string]bool
}

// scenarioNames returns the demo's scenarios, in the order they run.
func scenarioNames() []string {
	return []string{"race", "restart", "claims", "fill", "multi-pvc", "drain", "opt-in"}
}

// parseScenarios reads the -scenarios flag: "all", or scenario names
// separated by commas.
func parseScenarios(value string) (map[string]bool, error) {
	out := map[string]bool{}
	if strings.TrimSpace(value) == "all" {
		for _, name := range scenarioNames() {
			out[name] = true
		}
		return out, nil
	}
	for _, name := range strings.Split(value, ",") {
		name = strings.TrimSpace(name)
		if !slices.Contains(scenarioNames(), name) {
			return nil, fmt.Errorf("-scenarios: unknown scenario %q (known: all, %s)", name, strings.Join(scenarioNames(), ", "))
		}
		out[name] = true
	}
	return out, nil
}

func run() error {
	// A flag set of its own: controller-runtime registers --kubeconfig on
	// the global one.
	fs := flag.NewFlagSet("demo", flag.ExitOnError)
	var o options
	fs.StringVar(&o.configDir, "config-dir", "config", "The repository's config directory (CRDs, the deployment's RBAC and the sandbox topologies).")
	fs.StringVar(&o.logDir, "log-dir", filepath.Join("bin", "demo"), "Where to write the logs of the control plane (one directory per sandbox, named after its topology and scenarios) and of the in-process components (manager.log).")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "How long any one wait (for pods, volumes, ledgers) may take before the demo gives up.")
	scenarios := fs.String("scenarios", "all", "The scenarios to run, separated by commas: "+strings.Join(scenarioNames(), ", ")+"; or all. Only the sandboxes they need start.")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	var err error
	if o.scenarios, err = parseScenarios(*scenarios); err != nil {
		return err
	}
	if err := os.MkdirAll(o.logDir, 0o755); err != nil {
		return fmt.Errorf("creating the log directory: %w", err)
	}
	logFile, err := os.Create(filepath.Join(o.logDir, "manager.log"))
	if err != nil {
		return fmt.Errorf("creating the manager's log: %w", err)
	}
	defer logFile.Close()
	logger := zap.New(zap.WriteTo(logFile))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger) // client-go's leader election logs through klog

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	d := &demo{opts: o, out: os.Stdout, start: time.Now()}
	d.intro()
	var steps []step
	for _, s := range d.plan() {
		if s.runs = s.selected(o.scenarios); len(s.runs) > 0 {
			steps = append(steps, s)
		}
	}
	// Each sandbox starts while the previous step's scenarios run, so the
	// wait for a sandbox (most of it Longhorn's first look at its disks)
	// overlaps the work before it.
	var next <-chan started
	if len(steps) > 0 {
		next = d.startAhead(ctx, steps[0])
	}
	for i, s := range steps {
		current := next
		next = nil
		if i+1 < len(steps) {
			next = d.startAhead(ctx, steps[i+1])
		}
		if err := d.withSandbox(ctx, s, current); err != nil {
			d.broken = append(d.broken, err.Error())
		}
		if ctx.Err() != nil {
			break
		}
	}
	if next != nil {
		if st := <-next; st.err == nil {
			_ = st.cl.sb.Stop()
		}
	}
	d.summary()
	if len(d.broken) > 0 {
		return fmt.Errorf("%d problems:\n  %s", len(d.broken), strings.Join(d.broken, "\n  "))
	}
	return nil
}

// demo runs the scenarios and writes the report.
type demo struct {
	opts  options
	out   io.Writer
	start time.Time
	// claimsWithGate is the claims-beyond-capacity run with the gate, kept
	// until the run without it is reported beside it.
	claimsWithGate *claimsRun
	// fillWithGate is the fill with the gate, kept until the run without
	// it is reported beside it.
	fillWithGate *scenario.FillResult
	// ungated is set once a sandbox without the gate ran.
	ungated bool
	// lastRun is set while the run is its sandbox's last.
	lastRun bool
	// summaries are one line per scenario, for the end.
	summaries []string
	// broken describes what went wrong; the demo fails when it is not empty.
	broken []string
}

// step is one sandbox of the demo and the scenarios that run in it.
type step struct {
	topology string
	// noGate starts the sandbox without the admission gate.
	noGate bool
	// secondary starts the sandbox with the second scheduler
	// (--secondary-scheduler=true).
	secondary bool
	runs      []namedRun
}

// namedRun is a scenario run in a sandbox, by the scenario's name.
type namedRun struct {
	name string
	run  func(context.Context, *cluster) error
}

// plan is the demo's sandboxes, in order, with their scenarios, each on
// longhorn-manager's own controllers. The claims beyond capacity run twice,
// in a sandbox with the gate and in one without.
func (d *demo) plan() []step {
	return []step{
		{topology: "topology.yaml", runs: []namedRun{{"race", d.race}, {"restart", d.restart}}},
		{topology: "topology.yaml", runs: []namedRun{{"claims", d.claimsGated}, {"fill", d.fillGated}}},
		{topology: "topology.yaml", noGate: true, runs: []namedRun{{"claims", d.claimsUngated}, {"fill", d.fillUngated}}},
		{topology: "multi-disk.yaml", runs: []namedRun{{"multi-pvc", d.multiPVC}}},
		{topology: "drain.yaml", runs: []namedRun{{"drain", d.drain}}},
		{topology: "topology.yaml", secondary: true, runs: []namedRun{{"opt-in", d.optIn}}},
	}
}

// selected returns the step's runs whose scenario is chosen.
func (s step) selected(chosen map[string]bool) []namedRun {
	var out []namedRun
	for _, r := range s.runs {
		if chosen[r.name] {
			out = append(out, r)
		}
	}
	return out
}

// cluster is a running sandbox with a client that can watch.
type cluster struct {
	sb *sandbox.Sandbox
	c  client.WithWatch
}

// started is a step's sandbox, started ahead, or why it did not start.
type started struct {
	cl *cluster
	// what names the sandbox in the report: its topology file and what
	// runs with it.
	what   string
	logDir string
	// took is how long the sandbox took to get ready.
	took time.Duration
	err  error
}

// startAhead starts the step's sandbox in the background (with the
// admission gate unless noGate, with the second scheduler with secondary)
// and delivers it, or why it did not start, on the returned channel. It
// prints nothing: the report says what started when the step runs.
func (d *demo) startAhead(ctx context.Context, s step) <-chan started {
	out := make(chan started, 1)
	go func() { out <- d.startSandbox(ctx, s) }()
	return out
}

// startSandbox starts the step's sandbox and waits until it is ready.
func (d *demo) startSandbox(ctx context.Context, s step) started {
	topologyFile, noGate := s.topology, s.noGate
	topo, err := sandbox.LoadTopology(filepath.Join(d.opts.configDir, "sandbox", topologyFile))
	if err != nil {
		return started{err: err}
	}
	gate, logName := "with the admission gate", strings.TrimSuffix(topologyFile, filepath.Ext(topologyFile))
	if noGate {
		gate, logName = "without the admission gate (Longhorn as it is today)", logName+"-no-gate"
	}
	if s.secondary {
		gate, logName = gate+" and the second scheduler", logName+"-secondary-scheduler"
	}
	// Several sandboxes share a topology: each logs under the scenarios it
	// runs too.
	for _, r := range s.runs {
		logName += "-" + r.name
	}
	st := started{what: fmt.Sprintf("%s (%s), %s", topologyFile, describe(topo), gate), logDir: filepath.Join(d.opts.logDir, logName)}
	begin := time.Now()
	sb, err := sandbox.Start(ctx, sandbox.Options{
		Topology: topo, Extender: true, NoGate: noGate, ConfigDir: d.opts.configDir, LogDir: st.logDir,
		SecondaryScheduler: s.secondary,
	})
	if err != nil {
		st.err = fmt.Errorf("starting the sandbox with %s (logs in %s): %w", topologyFile, st.logDir, err)
		return st
	}
	st.took = time.Since(begin)
	c, err := client.NewWithWatch(sb.AdminConfig(), client.Options{Scheme: sb.Scheme()})
	if err != nil {
		st.err = errors.Join(fmt.Errorf("a client of the sandbox with %s: %w", topologyFile, err), sb.Stop())
		return st
	}
	st.cl = &cluster{sb: sb, c: c}
	return st
}

// withSandbox waits for the step's sandbox, started ahead, runs the step's
// runs against it in turn, and stops it again.
func (d *demo) withSandbox(ctx context.Context, s step, ahead <-chan started) (retErr error) {
	st := <-ahead
	if st.err != nil {
		return st.err
	}
	d.progress("sandbox with %s ready (started ahead, it took %s); control-plane logs in %s", st.what, seconds(st.took), st.logDir)
	d.ungated = d.ungated || s.noGate
	defer func() {
		if err := st.cl.sb.Err(); err != nil {
			retErr = errors.Join(retErr, fmt.Errorf("the sandbox with %s: %w", s.topology, err))
		}
		if err := st.cl.sb.Stop(); err != nil {
			retErr = errors.Join(retErr, fmt.Errorf("stopping the sandbox with %s: %w", s.topology, err))
		}
		d.progress("stopped the sandbox with %s", s.topology)
	}()
	for i, r := range s.runs {
		// The sandbox stops after its last run: nothing is left to clean
		// up for a run after it.
		d.lastRun = i == len(s.runs)-1
		if err := r.run(ctx, st.cl); err != nil {
			return err
		}
	}
	return nil
}

// common returns the scenario options of one run in its own namespace.
func (d *demo) common(namespace string) scenario.Common {
	return scenario.Common{
		Namespace: namespace,
		Timeout:   d.opts.timeout,
		Logf: func(format string, args ...any) {
			d.progress(namespace+": "+format, args...)
		},
	}
}

// finalCleanup is cleanup at the end of a run, skipped when the run is its
// sandbox's last (the sandbox stops next).
func (d *demo) finalCleanup(ctx context.Context, cl *cluster, o scenario.Common) error {
	if d.lastRun {
		d.progress("%s: not cleaned up: the sandbox stops next", o.Namespace)
		return nil
	}
	return d.cleanup(ctx, cl, o)
}

// cleanup cleans up after a run; a failure ends the sandbox's scenarios.
func (d *demo) cleanup(ctx context.Context, cl *cluster, o scenario.Common) error {
	if err := scenario.Cleanup(ctx, cl.c, o); err != nil {
		return fmt.Errorf("cleaning up %s: %w", o.Namespace, err)
	}
	return nil
}

// check records a run that did not complete as broken.
func (d *demo) check(what string, res scenario.Result) {
	if len(res.Unscheduled) > 0 {
		d.broken = append(d.broken, fmt.Sprintf("%s: pods without a node: %s", what, strings.Join(res.Unscheduled, "; ")))
	}
	if len(res.NotRunning) > 0 {
		d.broken = append(d.broken, fmt.Sprintf("%s: pods not Running: %s", what, strings.Join(res.NotRunning, ", ")))
	}
	for _, v := range res.Violations {
		d.broken = append(d.broken, fmt.Sprintf("%s: %s", what, v))
	}
}

func (d *demo) race(ctx context.Context, cl *cluster) error {
	var runs [2]scenario.Result
	for i, useExtender := range []bool{true, false} {
		o := d.common("race-" + withOrWithout(useExtender))
		res, err := scenario.Race(ctx, cl.c, scenario.RaceOptions{Common: o, Pods: 16, Size: "100Gi", UseExtender: useExtender})
		if err != nil {
			return err
		}
		d.check("race "+withOrWithout(useExtender)+" the extender", res)
		runs[i] = res
		if err := d.cleanup(ctx, cl, o); err != nil {
			return err
		}
	}
	d.reportRace(runs[0], runs[1])
	return d.chart("race-disks.svg", "The race: disks' granted bytes against their limits", runs[0].Ledgers, runs[1].Ledgers)
}

func (d *demo) restart(ctx context.Context, cl *cluster) error {
	var runs [2]scenario.RestartResult
	for i, useExtender := range []bool{true, false} {
		o := d.common("restart-" + withOrWithout(useExtender))
		res, err := scenario.Restart(ctx, cl.c, scenario.RestartOptions{Common: o, Pods: 16, Size: "100Gi", UseExtender: useExtender})
		if err != nil {
			return err
		}
		d.check("restart "+withOrWithout(useExtender)+" the extender, first run", res.Before)
		d.check("restart "+withOrWithout(useExtender)+" the extender, after the restart", res.After)
		runs[i] = res
		if err := d.cleanup(ctx, cl, o); err != nil {
			return err
		}
	}
	d.reportRestart(runs[0], runs[1])
	return nil
}

// claimsRun is one run of the claims beyond capacity.
type claimsRun struct {
	res scenario.ConcurrentPVCsResult
	// refused counts the replica writes the gate refused during the run.
	refused int
}

// claimsGated runs the claims beyond capacity in the sandbox with the
// gate, and keeps the result for the run without it.
func (d *demo) claimsGated(ctx context.Context, cl *cluster) error {
	run, err := d.claims(ctx, cl, "claims-with-gate")
	if err != nil {
		return err
	}
	d.claimsWithGate = run
	return nil
}

// claimsUngated runs the claims beyond capacity in the sandbox without the
// gate and reports both runs side by side.
func (d *demo) claimsUngated(ctx context.Context, cl *cluster) error {
	run, err := d.claims(ctx, cl, "claims-without-gate")
	if err != nil {
		return err
	}
	if d.claimsWithGate == nil {
		return fmt.Errorf("claims beyond capacity: the run with the gate did not complete, nothing to compare with")
	}
	d.reportClaims(*d.claimsWithGate, *run)
	return nil
}

// claimsBeyondCapacity is how many 100Gi claims the claims beyond capacity
// create at once on four 400Gi disks: twice what fits, enough for Longhorn's
// volume-controller workers to race.
const claimsBeyondCapacity = 32

// claims creates claimsBeyondCapacity 100Gi claims at once on the four
// 400Gi disks in namespace, counts the writes the gate refused meanwhile,
// and cleans up.
func (d *demo) claims(ctx context.Context, cl *cluster, namespace string) (*claimsRun, error) {
	o := d.common(namespace)
	before, err := gateRefusals()
	if err != nil {
		return nil, err
	}
	res, err := scenario.ConcurrentPVCs(ctx, cl.c, scenario.ConcurrentPVCsOptions{Common: o, Claims: claimsBeyondCapacity, Size: "100Gi", HoldPlacement: true})
	if err != nil {
		return nil, err
	}
	after, err := gateRefusals()
	if err != nil {
		return nil, err
	}
	for _, v := range res.Violations {
		d.broken = append(d.broken, namespace+": "+v)
	}
	run := &claimsRun{res: res, refused: after - before}
	return run, d.finalCleanup(ctx, cl, o)
}

func (d *demo) multiPVC(ctx context.Context, cl *cluster) error {
	var runs [2]scenario.MultiPVCResult
	for i, useExtender := range []bool{true, false} {
		o := d.common("multi-pvc-" + withOrWithout(useExtender))
		res, err := scenario.MultiPVC(ctx, cl.c, scenario.MultiPVCOptions{Common: o, Claims: 4, Size: "100Gi", UseExtender: useExtender})
		if err != nil {
			return err
		}
		d.check("multi-PVC "+withOrWithout(useExtender)+" the extender", res.Result)
		runs[i] = res
		if err := d.cleanup(ctx, cl, o); err != nil {
			return err
		}
	}
	d.reportMultiPVC(runs[0], runs[1])
	return nil
}

func (d *demo) drain(ctx context.Context, cl *cluster) error {
	var runs [2]scenario.DrainResult
	for i, useExtender := range []bool{true, false} {
		o := d.common("drain-" + withOrWithout(useExtender))
		res, err := scenario.Drain(ctx, cl.c, scenario.DrainOptions{Common: o, Pods: 4, Size: "100Gi", Node: "node-1", UseExtender: useExtender})
		if err != nil {
			return err
		}
		d.check("drain "+withOrWithout(useExtender)+" the extender, before the drain", res.Before)
		d.check("drain "+withOrWithout(useExtender)+" the extender, after the drain", res.After)
		runs[i] = res
		if err := d.cleanup(ctx, cl, o); err != nil {
			return err
		}
	}
	d.reportDrain(runs[0], runs[1])
	return d.chart("drain-disks.svg", "After the drain: disks' granted bytes against their limits", runs[0].After.Ledgers, runs[1].After.Ledgers)
}

func withOrWithout(useExtender bool) string {
	if useExtender {
		return "with"
	}
	return "without"
}

// describe summarizes a topology: "4 nodes: one 400Gi disk each".
func describe(t *sandbox.Topology) string {
	var parts []string
	for _, n := range t.Nodes {
		var sizes []string
		for _, disk := range n.Disks {
			sizes = append(sizes, scenario.Bytes(disk.Size))
		}
		parts = append(parts, n.Name+" "+strings.Join(sizes, "+"))
	}
	return strings.Join(parts, ", ")
}

// chart writes a bar chart of the disks' ledgers with and without the
// extender next to the demo's logs, as name, and prints its path.
func (d *demo) chart(name, title string, with, without []scenario.LedgerRow) error {
	path, err := writeDiskChartFile(d.opts.logDir, name, title, with, without)
	if err != nil {
		return fmt.Errorf("the disk chart: %w", err)
	}
	fmt.Fprintf(d.out, "\nChart of the disks' granted bytes against their limits, with and without the extender: %s\n", path)
	return nil
}
