package e2e_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/longhorn/diskschedule/test/framework/scenario"
	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
)

// raceRepetitions is how often the race runs through the extender, as the
// plan says; raceWithoutRepetitions how often without it (the plan says 10,
// which BenchmarkRace runs; three record the distributions here).
const (
	raceRepetitions        = 10
	raceWithoutRepetitions = 3
)

// raceSandboxes is how many sandboxes share the race's runs through the
// extender, side by side.
const raceSandboxes = 2

// raceCapacityPoll is how often the sandbox of TestRace refreshes the
// published storage capacity: shorter than the external-provisioner's
// minute, so that each run's wait for current capacity after the previous
// run's clean-up is short. Within a run, provisioning refreshes it anyway.
const raceCapacityPoll = 10 * time.Second

// TestRace is the plan's race-condition test: on four nodes with one 400Gi
// disk each, two of which (one per zone) already run other work, a
// StatefulSet of sixteen replicas with parallel pod management and a 100Gi
// claim template of a WaitForFirstConsumer class makes its pods at once.
// Through the extender every node gets exactly four pods, each pod's data
// stays on its node, and no ledger is ever over its limit. Without the
// extender kube-scheduler places them by its scores and the stale storage
// capacity, and the distribution is recorded: more than four pods on the
// emptier nodes, in most runs (BenchmarkRace counts them).
func TestRace(t *testing.T) {
	t.Parallel()
	start := func(t *testing.T) *cluster {
		return startSandbox(t, "topology.yaml", func(o *sandbox.Options) { o.CapacityPollInterval = raceCapacityPoll })
	}
	ctx := context.Background()
	t.Run("with the extender", func(t *testing.T) {
		inSandboxes(t, raceSandboxes, raceRepetitions, start, numbered("race"), func(t *testing.T, cl *cluster, i int) {
			o := common(t, fmt.Sprintf("race-with-%d", i+1))
			defer cl.cleanup(t, o)
			defer cl.dumpLedgers(t)
			res, err := scenario.Race(ctx, cl.c, scenario.RaceOptions{Common: o, Pods: 16, Size: "100Gi", UseExtender: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("pods per node %s; all scheduled in %s, all running in %s, StatefulSet ready in %s; %d ledger versions watched",
				res.Distribution(), res.TimeToAllScheduled, res.TimeToAllRunning, res.TimeToReady, res.LedgerVersions)
			checkRan(t, "race", res)
			for _, n := range res.Nodes {
				if got := res.PodsPerNode[n]; got != 4 {
					t.Errorf("node %s got %d pods, want 4 (pods per node %s)", n, got, res.Distribution())
				}
			}
			if len(res.RemoteData) > 0 {
				t.Errorf("pods whose volume has no replica on their node: %v", res.RemoteData)
			}
			if res.LedgerVersions == 0 {
				t.Errorf("the ledger monitor saw no DiskSchedule version during the race")
			}
			checkLedgers(t, "race", res)
		})
	})
	t.Run("without the extender", func(t *testing.T) {
		inSandboxes(t, 1, raceWithoutRepetitions, start, numbered("race"), func(t *testing.T, cl *cluster, i int) {
			o := common(t, fmt.Sprintf("race-without-%d", i+1))
			defer cl.cleanup(t, o)
			defer cl.dumpLedgers(t)
			res, err := scenario.Race(ctx, cl.c, scenario.RaceOptions{Common: o, Pods: 16, Size: "100Gi"})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("without the extender: pods per node %s (most on one node %d), %d pods with their data on another node; all scheduled in %s, all running in %s, StatefulSet ready in %s",
				res.Distribution(), res.MaxPodsPerNode(), len(res.RemoteData), res.TimeToAllScheduled, res.TimeToAllRunning, res.TimeToReady)
			checkRan(t, "race without the extender", res)
			checkLedgers(t, "race without the extender", res)
		})
	})
}

// raceBindRepetitions is how often the race runs with kube-scheduler
// binding through the extender's /bind.
const raceBindRepetitions = 3

// TestRaceThroughBind is the race with kube-scheduler binding the pods
// through the extender (bindVerb): the reservations are written before
// each binding, and every node still gets exactly four pods.
func TestRaceThroughBind(t *testing.T) {
	t.Parallel()
	cl := startSandbox(t, "topology.yaml", func(o *sandbox.Options) {
		o.ExtenderBind = true
		o.CapacityPollInterval = raceCapacityPoll
	})
	ctx := context.Background()
	for i := range raceBindRepetitions {
		t.Run(fmt.Sprintf("#%d", i+1), func(t *testing.T) {
			o := common(t, fmt.Sprintf("race-bind-%d", i+1))
			defer cl.cleanup(t, o)
			defer cl.dumpLedgers(t)
			res, err := scenario.Race(ctx, cl.c, scenario.RaceOptions{Common: o, Pods: 16, Size: "100Gi", UseExtender: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("pods per node %s; all scheduled in %s, all running in %s", res.Distribution(), res.TimeToAllScheduled, res.TimeToAllRunning)
			checkRan(t, "race through /bind", res)
			for _, n := range res.Nodes {
				if got := res.PodsPerNode[n]; got != 4 {
					t.Errorf("node %s got %d pods, want 4 (pods per node %s)", n, got, res.Distribution())
				}
			}
			checkLedgers(t, "race through /bind", res)
		})
	}
}
