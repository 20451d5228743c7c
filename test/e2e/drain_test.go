package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/longhorn/diskschedule/test/framework/scenario"
	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
)

// drainRepetitions is how often the node is drained, as the plan says.
const drainRepetitions = 3

// TestDrain is the plan's node-drain test: on two nodes with a 400Gi disk
// and two with a 99Gi disk, a StatefulSet of four pods with a 100Gi volume
// each starts on node-1 (the others cordoned). Every node is uncordoned,
// then node-1 is drained through the eviction API and the StatefulSet
// controller re-creates the pods: through the extender (and through the
// second scheduler's diskschedule plugin, once) all four pods move to
// node-2, the only other node whose disk can hold their volumes, their
// data follows them, and the drain ends. Without the extender where the pods go is only
// logged, and the drain ends exactly when every pod's data followed it:
// Longhorn keeps node-1's instance manager, through its
// PodDisruptionBudget, while node-1 holds the last healthy replica of a
// volume (longhorn-manager v1.12.0 controller/instance_manager_controller.go,
// canDeleteInstanceManagerPDB, line 1458, with the default node-drain-policy
// block-if-contains-last-replica), which is so of a volume whose pod went to
// a 99Gi node.
func TestDrain(t *testing.T) {
	t.Parallel()
	start := func(t *testing.T) *cluster { return startSandbox(t, "drain.yaml") }
	ctx := context.Background()
	t.Run("with the extender or the plugin", func(t *testing.T) {
		ps := placers(drainRepetitions, 1)
		startBoth := func(t *testing.T) *cluster { return startSandbox(t, "drain.yaml", withPlugin) }
		inSandboxes(t, 1, len(ps), startBoth, runNames(ps), func(t *testing.T, cl *cluster, i int) {
			o := ps[i].scenarioOf(common(t, fmt.Sprintf("drain-%s-%d", ps[i].name, i+1)))
			defer cl.cleanup(t, o)
			defer cl.dumpLedgers(t)
			res, err := scenario.Drain(ctx, cl.c, scenario.DrainOptions{Common: o, Pods: 4, Size: "100Gi", Node: "node-1", UseExtender: ps[i].useExtender})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("before the drain %s, after it %s (pods per node)", res.Before.Distribution(), res.After.Distribution())
			checkRan(t, "before the drain", res.Before)
			if got := res.Before.PodsPerNode["node-1"]; got != 4 {
				t.Fatalf("%d pods started on node-1, want all 4 (the others were cordoned): %v", got, res.Before.PodNodes)
			}
			checkRan(t, "after the drain", res.After)
			for pod, node := range res.After.PodNodes {
				if node != "node-2" {
					t.Errorf("after the drain of node-1, pod %s went to %s, want node-2 (the 99Gi nodes cannot hold a 100Gi volume)", pod, node)
				}
			}
			if len(res.After.RemoteData) > 0 {
				t.Errorf("after the drain, pods whose data did not follow them: %v", res.After.RemoteData)
			}
			if len(res.Blocked) > 0 {
				t.Errorf("the drain of node-1 did not end: %v", res.Blocked)
			} else {
				t.Logf("the drain of node-1 ended after %s", res.Drained)
			}
			for _, row := range res.After.Ledgers {
				want := int64(0)
				if row.Node == "node-2" {
					want = 400 << 30
				}
				if row.Scheduled != want {
					t.Errorf("after the drain, disk %s of node %s grants %s, want %s", row.Disk, row.Node,
						scenario.Bytes(row.Scheduled), scenario.Bytes(want))
				}
			}
			checkLedgers(t, "before the drain", res.Before)
			checkLedgers(t, "after the drain", res.After)
		})
	})
	t.Run("without the extender", func(t *testing.T) {
		inSandboxes(t, 1, 1, start, numbered("run"), func(t *testing.T, cl *cluster, _ int) {
			o := common(t, "drain-without")
			defer cl.cleanup(t, o)
			res, err := scenario.Drain(ctx, cl.c, scenario.DrainOptions{Common: o, Pods: 4, Size: "100Gi", Node: "node-1"})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("without the extender: before the drain %s, after it %s (pods per node); %d pods' data stayed behind; drain ended after %s, left %v",
				res.Before.Distribution(), res.After.Distribution(), len(res.After.RemoteData), res.Drained, res.Blocked)
			checkRan(t, "before the drain", res.Before)
			checkRan(t, "after the drain", res.After)
			switch {
			case len(res.After.RemoteData) == 0 && len(res.Blocked) > 0:
				t.Errorf("every pod's data followed it, yet the drain of node-1 did not end: %v", res.Blocked)
			case len(res.After.RemoteData) > 0 && !blockedByInstanceManager(res.Blocked):
				t.Errorf("node-1 keeps the only replica of the volumes of %v, yet its instance manager was evicted (left: %v)", res.After.RemoteData, res.Blocked)
			}
			checkLedgers(t, "before the drain", res.Before)
			checkLedgers(t, "after the drain", res.After)
		})
	})
}

// blockedByInstanceManager reports whether a drain left an instance
// manager pod of Longhorn's, its eviction refused.
func blockedByInstanceManager(blocked []string) bool {
	for _, b := range blocked {
		if strings.HasPrefix(b, sandbox.Namespace+"/instance-manager-") && strings.Contains(b, "eviction refused") {
			return true
		}
	}
	return false
}
