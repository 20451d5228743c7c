package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/test/framework/scenario"
	"github.com/longhorn/diskschedule/test/framework/testenv"
	"github.com/longhorn/diskschedule/test/framework/testenv/sandboxtest"
	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
)

// cluster is a running sandbox and a client of it that can watch.
type cluster struct {
	sb *sandbox.Sandbox
	c  client.WithWatch
}

// startSandbox starts the sandbox with the extender and the topology file
// of config/sandbox, adjusted by adjust, and stops it when the test ends,
// failing the test when a component stopped on its own or outlives Stop.
func startSandbox(t testing.TB, topologyFile string, adjust ...func(*sandbox.Options)) *cluster {
	t.Helper()
	topo, err := sandbox.LoadTopology(filepath.Join(testenv.RepoRoot(), "config", "sandbox", topologyFile))
	if err != nil {
		t.Fatal(err)
	}
	opts := sandbox.Options{Topology: topo, Extender: true}
	for _, a := range adjust {
		a(&opts)
	}
	t.Logf("starting the sandbox with %s", topologyFile)
	sb := sandboxtest.Start(t, sandboxtest.Options{Sandbox: opts, Strict: true, KeepLogs: true})
	c, err := client.NewWithWatch(sb.AdminConfig(), client.Options{Scheme: sb.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{sb: sb, c: c}
}

// common returns the scenario options of one run in its own namespace,
// logging progress to the test.
func common(t testing.TB, namespace string) scenario.Common {
	return scenario.Common{
		Namespace: namespace,
		Timeout:   90 * time.Second,
		Logf: func(format string, args ...any) {
			t.Helper()
			t.Logf("  "+namespace+": "+format, args...)
		},
	}
}

// cleanup runs scenario.Cleanup, failing the test when it fails.
func (cl *cluster) cleanup(t testing.TB, o scenario.Common) {
	t.Helper()
	if err := scenario.Cleanup(context.Background(), cl.c, o); err != nil {
		t.Fatal(err)
	}
}

// checkLedgers fails the test when a ledger broke its invariant
// (ledger.Violation, which the scenario's monitor applies to every version
// seen during a run), or ends over its limit: nothing in these runs is
// adopted.
func checkLedgers(t testing.TB, what string, res scenario.Result) {
	t.Helper()
	for _, v := range res.Violations {
		t.Errorf("%s: %s", what, v)
	}
	for _, row := range res.Ledgers {
		if row.Scheduled > row.Limit {
			t.Errorf("%s: the ledger of disk %s of node %s ends over its limit: %s of %s",
				what, row.Disk, row.Node, scenario.Bytes(row.Scheduled), scenario.Bytes(row.Limit))
		}
	}
}

// checkRan fails the test when a pod was not scheduled or did not run, or
// a volume was left with more replicas than it wants.
func checkRan(t testing.TB, what string, res scenario.Result) {
	t.Helper()
	if res.SurplusReplicas > 0 {
		t.Errorf("%s: the volumes hold %d replicas more than they want", what, res.SurplusReplicas)
	}
	if len(res.Unscheduled) > 0 {
		t.Errorf("%s: pods without a node: %s", what, strings.Join(res.Unscheduled, "; "))
	}
	if len(res.NotRunning) > 0 {
		t.Errorf("%s: pods not Running: %s", what, strings.Join(res.NotRunning, ", "))
	}
}

// dumpLedgers logs every DiskSchedule's spec and status when the test failed.
func (cl *cluster) dumpLedgers(t testing.TB) {
	t.Helper()
	if !t.Failed() {
		return
	}
	list := &dsv1.DiskScheduleList{}
	if err := cl.c.List(context.Background(), list, client.InNamespace(sandbox.Namespace)); err != nil {
		t.Logf("listing the DiskSchedules: %v", err)
		return
	}
	for _, ds := range list.Items {
		spec, _ := json.Marshal(ds.Spec)
		status, _ := json.Marshal(ds.Status)
		t.Logf("DiskSchedule %s (disk %s of node %s), generation %d:\n  spec %s\n  status %s", ds.Name, ds.Spec.Name, ds.Spec.NodeID, ds.Generation, spec, status)
	}
}

// inSandboxes runs run for the repetitions 0 … n-1, split over shards
// sandboxes that start and run side by side (go test's -parallel bounds
// how many at once), each started by start; a sandbox's repetitions run one
// after another in it, each a subtest named name(i). The repetitions of a
// sandbox share it as the scenarios share a cluster: each in a namespace of
// its own, each cleaned up before the next.
func inSandboxes(t *testing.T, shards, n int, start func(t *testing.T) *cluster, name func(i int) string, run func(t *testing.T, cl *cluster, i int)) {
	t.Helper()
	for s := range min(shards, n) {
		t.Run(fmt.Sprintf("sandbox %d", s+1), func(t *testing.T) {
			t.Parallel()
			cl := start(t)
			for i := s; i < n; i += shards {
				t.Run(name(i), func(t *testing.T) { run(t, cl, i) })
			}
		})
	}
}

// numbered names the repetitions of a run "<what> #1", "<what> #2", ….
func numbered(what string) func(i int) string {
	return func(i int) string { return fmt.Sprintf("%s #%d", what, i+1) }
}

// placer is who places a run's pods: kube-scheduler calling the extender,
// or the second scheduler, kube-scheduler with the diskschedule plugin
// compiled in. Both make the same decisions from the same ledgers, and
// every scenario that runs through the extender also runs through the
// plugin, with the same checks.
type placer struct {
	// name names the run's subtest and namespace.
	name string
	// useExtender makes the pods request the extender's resource.
	useExtender bool
	// scheduler is the pods' schedulerName ("" for kube-scheduler's).
	scheduler string
}

var (
	throughExtender = placer{name: "extender", useExtender: true}
	throughPlugin   = placer{name: "plugin", scheduler: scenario.SecondaryScheduler}
)

// placers returns the placers of runs 0 … extender+plugin-1: the first
// extender runs go through the extender, the others through the plugin.
// Their sandboxes run both (withPlugin), so a scenario meets the same
// cluster either way.
func placers(extender, plugin int) []placer {
	out := make([]placer, 0, extender+plugin)
	for range extender {
		out = append(out, throughExtender)
	}
	for range plugin {
		out = append(out, throughPlugin)
	}
	return out
}

// runNames names run i of ps after its placer and its number among that
// placer's runs: "extender #2", "plugin #1".
func runNames(ps []placer) func(i int) string {
	return func(i int) string {
		k := 0
		for _, p := range ps[:i] {
			if p == ps[i] {
				k++
			}
		}
		return fmt.Sprintf("%s #%d", ps[i].name, k+1)
	}
}

// scenarioOf returns o for a run placed by p.
func (p placer) scenarioOf(o scenario.Common) scenario.Common {
	o.Scheduler = p.scheduler
	return o
}

// withPlugin also runs the second scheduler (--secondary-scheduler=true)
// beside kube-scheduler with the extender.
func withPlugin(o *sandbox.Options) { o.SecondaryScheduler = true }
