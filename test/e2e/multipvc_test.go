package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/longhorn/diskschedule/test/framework/scenario"
)

// multiPVCRepetitions is how often the pod with four claims is placed, as
// the plan says.
const multiPVCRepetitions = 10

// multiPVCSandboxes is how many sandboxes share those runs, side by side.
const multiPVCSandboxes = 2

// TestMultiPVC is the plan's multiple-claims test: on nodes with 1, 2, 3
// and 4 disks of 100Gi, a pod with four 100Gi claims fits only on the node
// with four disks, and through the extender it lands there every time,
// with one replica on each of its disks; through the second scheduler's
// diskschedule plugin too (a run in each of the extender's sandboxes).
// Without the extender the node is only logged: kube-scheduler may pick
// any node.
func TestMultiPVC(t *testing.T) {
	t.Parallel()
	start := func(t *testing.T) *cluster { return startSandbox(t, "multi-disk.yaml") }
	ctx := context.Background()
	t.Run("with the extender or the plugin", func(t *testing.T) {
		ps := placers(multiPVCRepetitions, multiPVCSandboxes)
		startBoth := func(t *testing.T) *cluster { return startSandbox(t, "multi-disk.yaml", withPlugin) }
		inSandboxes(t, multiPVCSandboxes, len(ps), startBoth, runNames(ps), func(t *testing.T, cl *cluster, i int) {
			o := ps[i].scenarioOf(common(t, fmt.Sprintf("multi-pvc-%s-%d", ps[i].name, i+1)))
			defer cl.cleanup(t, o)
			defer cl.dumpLedgers(t)
			res, err := scenario.MultiPVC(ctx, cl.c, scenario.MultiPVCOptions{Common: o, Claims: 4, Size: "100Gi", UseExtender: ps[i].useExtender})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("the pod went to %s; scheduled in %s, running in %s", res.Node, res.TimeToAllScheduled, res.TimeToAllRunning)
			checkRan(t, "multi-PVC", res.Result)
			if res.Node != "node-4" {
				t.Errorf("the pod with four 100Gi claims went to %q, want node-4, the only node with four 100Gi disks", res.Node)
			}
			if len(res.RemoteData) > 0 {
				t.Errorf("the pod has a volume with no replica on its node")
			}
			for _, row := range res.Ledgers {
				want := int64(0)
				if row.Node == "node-4" {
					want = 100 << 30
				}
				if row.Scheduled != want {
					t.Errorf("disk %s of node %s grants %s, want %s (one 100Gi replica on each disk of node-4, nothing elsewhere)",
						row.Disk, row.Node, scenario.Bytes(row.Scheduled), scenario.Bytes(want))
				}
			}
			checkLedgers(t, "multi-PVC", res.Result)
		})
	})
	t.Run("without the extender", func(t *testing.T) {
		inSandboxes(t, 1, 1, start, numbered("run"), func(t *testing.T, cl *cluster, _ int) {
			o := common(t, "multi-pvc-without")
			defer cl.cleanup(t, o)
			res, err := scenario.MultiPVC(ctx, cl.c, scenario.MultiPVCOptions{Common: o, Claims: 4, Size: "100Gi"})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("without the extender the pod went to %s; %d of its 4 volumes have their replica on another node", res.Node, res.RemoteVolumes)
			checkRan(t, "multi-PVC without the extender", res.Result)
			checkLedgers(t, "multi-PVC without the extender", res.Result)
		})
	})
}

// multiPVCRaceRepetitions is how often three pods race for the nodes that
// hold three claims.
const multiPVCRaceRepetitions = 3

// TestMultiPVCRace creates three pods with three 100Gi claims each at once
// on nodes with 1, 2, 3 and 4 disks of 100Gi: only the 3-disk and the
// 4-disk node can hold a pod's claims, one pod each. Through the extender
// (and through the second scheduler's diskschedule plugin, once) exactly
// one pod lands on each of them, the third stays Pending with the numbers,
// and no ledger goes over its limit.
func TestMultiPVCRace(t *testing.T) {
	t.Parallel()
	cl := startSandbox(t, "multi-disk.yaml", withPlugin)
	ctx := context.Background()
	ps := placers(multiPVCRaceRepetitions, 1)
	for i, p := range ps {
		t.Run(runNames(ps)(i), func(t *testing.T) {
			o := p.scenarioOf(common(t, fmt.Sprintf("multi-pvc-race-%s-%d", p.name, i+1)))
			// The third pod never fits: its wait is bounded by this.
			o.Timeout = 20 * time.Second
			defer cl.cleanup(t, o)
			defer cl.dumpLedgers(t)
			res, err := scenario.MultiPVC(ctx, cl.c, scenario.MultiPVCOptions{Common: o, Pods: 3, Claims: 3, Size: "100Gi", UseExtender: p.useExtender})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("pods per node %s; unscheduled %v", res.Distribution(), res.Unscheduled)
			for node, want := range map[string]int{"node-1": 0, "node-2": 0, "node-3": 1, "node-4": 1} {
				if got := res.PodsPerNode[node]; got != want {
					t.Errorf("node %s got %d pods with three 100Gi claims, want %d (pods per node %s)", node, got, want, res.Distribution())
				}
			}
			if len(res.Unscheduled) != 1 || !strings.Contains(res.Unscheduled[0], "Gi") {
				t.Errorf("want one pod Pending with the numbers, got %v", res.Unscheduled)
			}
			checkLedgers(t, "multi-PVC race", res.Result)
		})
	}
}
