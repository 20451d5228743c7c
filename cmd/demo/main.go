// Command demo runs the Longhorn scheduler extender's test plan in the
// sandbox and prints what happened, with and without the extender, side by
// side: the race of sixteen pods for four disks, a pod with four claims,
// pods restarted, a node drained, and more claims than the disks hold
// created at once. It starts one sandbox per topology of config/sandbox in
// turn (real etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler processes, the manager, the disk monitors and the
// simulated data plane in-process) and stops each before the next. Run it from the repository's root (make demo).
//
// It exits 0 when every scenario ran, whatever the pods did without the
// extender, and 1 when something broke: a wait timed out, a pod never ran,
// a ledger went over its limit, or a component failed.
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
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/longhorn/diskschedule/internal/sandbox"
	"github.com/longhorn/diskschedule/internal/scenario"
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
}

func run() error {
	// A flag set of its own: controller-runtime registers --kubeconfig on
	// the global one.
	fs := flag.NewFlagSet("demo", flag.ExitOnError)
	var o options
	fs.StringVar(&o.configDir, "config-dir", "config", "The repository's config directory (CRDs, the deployment's RBAC and the sandbox topologies).")
	fs.StringVar(&o.logDir, "log-dir", filepath.Join("bin", "demo"), "Where to write the logs of the control plane (one directory per topology) and of the in-process components (manager.log).")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "How long any one wait (for pods, volumes, ledgers) may take before the demo gives up.")
	if err := fs.Parse(os.Args[1:]); err != nil {
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
	for _, step := range []struct {
		topology string
		run      func(context.Context, *cluster) error
	}{
		{"topology.yaml", d.onFourEqualNodes},
		{"multi-disk.yaml", d.multiPVC},
		{"drain.yaml", d.drain},
	} {
		if err := d.withSandbox(ctx, step.topology, step.run); err != nil {
			d.broken = append(d.broken, err.Error())
		}
		if ctx.Err() != nil {
			break
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
	// summaries are one line per scenario, for the end.
	summaries []string
	// broken describes what went wrong; the demo fails when it is not empty.
	broken []string
}

// cluster is a running sandbox with a client that can watch.
type cluster struct {
	sb *sandbox.Sandbox
	c  client.WithWatch
}

// withSandbox starts a sandbox with the topology file, runs fn against it,
// and stops it again.
func (d *demo) withSandbox(ctx context.Context, topologyFile string, fn func(context.Context, *cluster) error) (retErr error) {
	topo, err := sandbox.LoadTopology(filepath.Join(d.opts.configDir, "sandbox", topologyFile))
	if err != nil {
		return err
	}
	d.progress("starting a sandbox with %s (%s)", topologyFile, describe(topo))
	started := time.Now()
	logDir := filepath.Join(d.opts.logDir, strings.TrimSuffix(topologyFile, filepath.Ext(topologyFile)))
	sb, err := sandbox.Start(ctx, sandbox.Options{
		Topology: topo, Extender: true, ConfigDir: d.opts.configDir, LogDir: logDir,
	})
	if err != nil {
		return fmt.Errorf("starting the sandbox with %s (logs in %s): %w", topologyFile, logDir, err)
	}
	d.progress("sandbox ready in %s; control-plane logs in %s", seconds(time.Since(started)), logDir)
	defer func() {
		if err := sb.Err(); err != nil {
			retErr = errors.Join(retErr, fmt.Errorf("the sandbox with %s: %w", topologyFile, err))
		}
		if err := sb.Stop(); err != nil {
			retErr = errors.Join(retErr, fmt.Errorf("stopping the sandbox with %s: %w", topologyFile, err))
		}
		d.progress("stopped the sandbox with %s", topologyFile)
	}()
	c, err := client.NewWithWatch(sb.AdminConfig(), client.Options{Scheme: sb.Scheme()})
	if err != nil {
		return err
	}
	return fn(ctx, &cluster{sb: sb, c: c})
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

// onFourEqualNodes runs the scenarios of four nodes with one 400Gi disk
// each: the race, the restart and the claims beyond capacity.
func (d *demo) onFourEqualNodes(ctx context.Context, cl *cluster) error {
	for _, fn := range []func(context.Context, *cluster) error{d.race, d.restart, d.concurrentPVCs} {
		if err := fn(ctx, cl); err != nil {
			return err
		}
	}
	return nil
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
	return nil
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

func (d *demo) concurrentPVCs(ctx context.Context, cl *cluster) error {
	o := d.common("claims-at-once")
	res, err := scenario.ConcurrentPVCs(ctx, cl.c, scenario.ConcurrentPVCsOptions{Common: o, Claims: 20, Size: "100Gi"})
	if err != nil {
		return err
	}
	for _, v := range res.Violations {
		d.broken = append(d.broken, "claims at once: "+v)
	}
	d.reportConcurrentPVCs(res)
	return d.cleanup(ctx, cl, o)
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
	return nil
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
