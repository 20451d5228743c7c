package e2e_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/longhorn/diskschedule/internal/metrics"
	"github.com/longhorn/diskschedule/test/framework/scenario"
	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
)

// optInRepetitions is how often the race runs with pods opted in by their
// namespace.
const optInRepetitions = 3

// podWebhookLatency is the pod opt-in webhook's latency histogram, which
// the sandbox's in-process managers register with controller-runtime's
// registry.
const podWebhookLatency = "longhorn_diskschedule_pod_webhook_duration_seconds"

// TestOptInRace is the race of TestRace with its StatefulSet written
// without longhorn.io/scheduler-extender, in a namespace labelled
// diskschedule.longhorn.io/extender=enabled, in a sandbox that runs the
// second scheduler (--secondary-scheduler=true) and no extender
// (--extender=false): the pod opt-in webhook gives every pod the
// extender's resource and the scheduler diskschedule-scheduler, kube-scheduler
// with the diskschedule plugin compiled in, which places them, four per
// node, each pod's data on its node, reserving their space in the ledgers
// before it binds them. A pod with a Longhorn claim in an
// unlabelled namespace is stored as it was written. The second scheduler,
// run as its ServiceAccount under its component's RBAC, is refused nothing.
// The webhook's latency (p99) is logged.
func TestOptInRace(t *testing.T) {
	t.Parallel()
	logDir := t.TempDir()
	cl := startSandbox(t, "topology.yaml", func(o *sandbox.Options) {
		o.SecondaryScheduler = true
		o.Extender = false
		o.CapacityPollInterval = raceCapacityPoll
		o.LogDir = logDir
	})
	ctx := context.Background()
	for i := range optInRepetitions {
		t.Run(fmt.Sprintf("#%d", i+1), func(t *testing.T) {
			o := common(t, fmt.Sprintf("opt-in-race-%d", i+1))
			defer cl.cleanup(t, o)
			defer cl.dumpLedgers(t)
			res, err := scenario.OptInRace(ctx, cl.c, scenario.RaceOptions{Common: o, Pods: 16, Size: "100Gi"})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("pods per node %s; %d pods opted in; all scheduled in %s, all running in %s, StatefulSet ready in %s",
				res.Distribution(), res.OptedIn, res.TimeToAllScheduled, res.TimeToAllRunning, res.TimeToReady)
			if res.OptedIn != 16 || len(res.NotOptedIn) > 0 {
				t.Errorf("%d of 16 pods opted in; not: %v", res.OptedIn, res.NotOptedIn)
			}
			checkRan(t, "opt-in race", res.Result)
			for _, n := range res.Nodes {
				if got := res.PodsPerNode[n]; got != 4 {
					t.Errorf("node %s got %d pods, want 4 (pods per node %s)", n, got, res.Distribution())
				}
			}
			if len(res.RemoteData) > 0 {
				t.Errorf("pods whose volume has no replica on their node: %v", res.RemoteData)
			}
			checkLedgers(t, "opt-in race", res.Result)
		})
	}
	t.Run("a pod in an unlabelled namespace", func(t *testing.T) {
		o := common(t, "opt-in-unlabelled")
		defer cl.cleanup(t, o)
		pod, given, err := scenario.UnlabelledPod(ctx, cl.c, o)
		if err != nil {
			t.Fatal(err)
		}
		if given != "" || pod.Spec.SchedulerName != corev1.DefaultSchedulerName {
			t.Errorf("the pod in an unlabelled namespace was given %s", given)
		}
	})
	// The second scheduler runs as its ServiceAccount under the RBAC the
	// chart and config/scheduler/secondary give it: nothing it asked for
	// was refused.
	log, err := os.ReadFile(filepath.Join(logDir, "secondary-scheduler.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(log), "\n") {
		if strings.Contains(strings.ToLower(line), "forbidden") {
			t.Errorf("the second scheduler was refused: %s", line)
		}
	}
	p99, n, err := metrics.HistogramQuantile(ctrlmetrics.Registry, podWebhookLatency, 0.99)
	if err != nil {
		t.Fatal(err)
	}
	if n < 16*optInRepetitions || math.IsNaN(p99) {
		t.Fatalf("the pod webhook answered %d times, want at least %d", n, 16*optInRepetitions)
	}
	t.Logf("the pod opt-in webhook answered %d pods, p99 %s", n, time.Duration(p99*float64(time.Second)).Round(10*time.Microsecond))
}
