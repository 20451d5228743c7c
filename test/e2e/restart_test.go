package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/longhorn/diskschedule/test/framework/scenario"
)

// restartRepetitions is how often the pods are restarted, as the plan says.
const restartRepetitions = 3

// TestRestart is the plan's pod-restart test: a StatefulSet of sixteen
// pods with a 100Gi volume each on four nodes with one 400Gi disk each, its
// volumes retained, is deleted and created again on the claims it kept;
// through the extender each
// comes back to the node it was on, where its data is, and through the
// second scheduler's diskschedule plugin as well (one run, in the
// extender's sandbox). Without the extender the moves are only logged.
func TestRestart(t *testing.T) {
	t.Parallel()
	start := func(t *testing.T) *cluster { return startSandbox(t, "topology.yaml") }
	ctx := context.Background()
	t.Run("with the extender or the plugin", func(t *testing.T) {
		ps := placers(restartRepetitions, 1)
		startBoth := func(t *testing.T) *cluster { return startSandbox(t, "topology.yaml", withPlugin) }
		inSandboxes(t, 1, len(ps), startBoth, runNames(ps), func(t *testing.T, cl *cluster, i int) {
			o := ps[i].scenarioOf(common(t, fmt.Sprintf("restart-%s-%d", ps[i].name, i+1)))
			defer cl.cleanup(t, o)
			defer cl.dumpLedgers(t)
			res, err := scenario.Restart(ctx, cl.c, scenario.RestartOptions{Common: o, Pods: 16, Size: "100Gi", UseExtender: ps[i].useExtender})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("pods per node %s before, %s after the restart; %d moved", res.Before.Distribution(), res.After.Distribution(), len(res.Moved))
			checkRan(t, "before the restart", res.Before)
			checkRan(t, "after the restart", res.After)
			if len(res.After.PodNodes) != 16 {
				t.Fatalf("%d pods placed after the restart, want 16", len(res.After.PodNodes))
			}
			if len(res.Moved) > 0 {
				t.Errorf("pods that did not come back to their node: %s", strings.Join(res.Moved, ", "))
			}
			if len(res.After.RemoteData) > 0 {
				t.Errorf("after the restart, pods whose volume has no replica on their node: %v", res.After.RemoteData)
			}
			checkLedgers(t, "before the restart", res.Before)
			checkLedgers(t, "after the restart", res.After)
		})
	})
	t.Run("without the extender", func(t *testing.T) {
		inSandboxes(t, 1, 1, start, numbered("run"), func(t *testing.T, cl *cluster, _ int) {
			o := common(t, "restart-without")
			defer cl.cleanup(t, o)
			res, err := scenario.Restart(ctx, cl.c, scenario.RestartOptions{Common: o, Pods: 16, Size: "100Gi"})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("without the extender: pods per node %s before, %s after the restart; moved: %s",
				res.Before.Distribution(), res.After.Distribution(), strings.Join(res.Moved, ", "))
			checkRan(t, "before the restart", res.Before)
			checkRan(t, "after the restart", res.After)
			checkLedgers(t, "before the restart", res.Before)
			checkLedgers(t, "after the restart", res.After)
		})
	})
}
