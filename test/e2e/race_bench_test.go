package e2e_test

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/longhorn/diskschedule/test/framework/scenario"
	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
)

var barePods = flag.Bool("e2e.bare-pods", false, "BenchmarkRace: bare pods created at once on bound claims instead of a StatefulSet.")

// BenchmarkRace times the plan's race, a StatefulSet of sixteen pods with
// a 100Gi claim template of the WaitForFirstConsumer class created at once
// on four nodes with one 400Gi disk each, two of them (one per zone) busy
// with other work (scenario.UnevenWork), with and without the extender, in
// one sandbox with the external-provisioner's default capacity poll
// interval (a minute). Each op runs both. It reports the mean seconds until
// every pod has a node, until every pod runs and until the StatefulSet is
// ready, their ratios (with ÷ without), the most pods any node got, as the
// mean over ops and the worst op, and in how many ops some node got more
// than its disk holds (four), and prints each op's distributions as it is
// measured. The clean-up after each race, which is not timed, waits until
// the published storage capacity is current again (up to the poll
// interval).
//
// With -e2e.bind kube-scheduler binds through the extender's /bind. With
// -e2e.bare-pods the race runs without the StatefulSet: claims bound first,
// then sixteen bare pods created at once (scenario.RaceOptions.BarePods).
//
//	KUBEBUILDER_ASSETS=$PWD/bin/k8s go test ./test/e2e/ -run '^$' -bench Race -benchtime=5x [-e2e.bind] [-e2e.bare-pods]
func BenchmarkRace(b *testing.B) {
	cl := startSandbox(b, "topology.yaml", func(o *sandbox.Options) { o.ExtenderBind = *bindThroughExtender })
	ctx := context.Background()
	var sum [2]struct{ scheduled, running, ready, maxPods float64 }
	var worst, overplaced [2]int
	ops := 0
	for b.Loop() {
		ops++
		var line []string
		for j, useExtender := range []bool{true, false} {
			o := common(b, fmt.Sprintf("bench-%s-%d", withOrWithout(useExtender), ops))
			o.Logf = nil
			res, err := scenario.Race(ctx, cl.c, scenario.RaceOptions{Common: o, Pods: 16, Size: "100Gi", UseExtender: useExtender, BarePods: *barePods})
			if err != nil {
				b.Fatal(err)
			}
			if !res.OK() {
				b.Fatalf("race %s the extender did not complete: unscheduled %v, not running %v, ledger violations %v",
					withOrWithout(useExtender), res.Unscheduled, res.NotRunning, res.Violations)
			}
			sum[j].scheduled += res.TimeToAllScheduled.Seconds()
			sum[j].running += res.TimeToAllRunning.Seconds()
			sum[j].ready += res.TimeToReady.Seconds()
			sum[j].maxPods += float64(res.MaxPodsPerNode())
			worst[j] = max(worst[j], res.MaxPodsPerNode())
			if res.MaxPodsPerNode() > racePodsPerDisk {
				overplaced[j]++
			}
			line = append(line, fmt.Sprintf("%s the extender %s, ready in %.3fs", withOrWithout(useExtender), res.Distribution(),
				res.TimeToReady.Seconds()))
			b.StopTimer()
			cl.cleanup(b, o)
			b.StartTimer()
		}
		// The testing package keeps only a benchmark's first ten log lines.
		fmt.Printf("%s: op %d: pods per node %s\n", b.Name(), ops, strings.Join(line, "; "))
	}
	n := float64(ops)
	b.ReportMetric(sum[0].scheduled/n, "scheduled-with-s")
	b.ReportMetric(sum[1].scheduled/n, "scheduled-without-s")
	b.ReportMetric(sum[0].scheduled/sum[1].scheduled, "scheduled-ratio")
	b.ReportMetric(sum[0].running/n, "running-with-s")
	b.ReportMetric(sum[1].running/n, "running-without-s")
	b.ReportMetric(sum[0].running/sum[1].running, "running-ratio")
	if !*barePods { // bare pods have no StatefulSet to be ready
		b.ReportMetric(sum[0].ready/n, "ready-with-s")
		b.ReportMetric(sum[1].ready/n, "ready-without-s")
		b.ReportMetric(sum[0].ready/sum[1].ready, "ready-ratio")
	}
	b.ReportMetric(sum[0].maxPods/n, "max-pods-with")
	b.ReportMetric(sum[1].maxPods/n, "max-pods-without")
	b.ReportMetric(float64(worst[0]), "worst-max-pods-with")
	b.ReportMetric(float64(worst[1]), "worst-max-pods-without")
	b.ReportMetric(float64(overplaced[0]), "overplaced-ops-with")
	b.ReportMetric(float64(overplaced[1]), "overplaced-ops-without")
}

// racePodsPerDisk is how many of the race's 100Gi volumes a 400Gi disk holds.
const racePodsPerDisk = 4

func withOrWithout(useExtender bool) string {
	if useExtender {
		return "with"
	}
	return "without"
}
