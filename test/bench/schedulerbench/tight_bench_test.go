package schedulerbench

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/settings"
	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
)

// tightClaimSize fills a 10Ti disk with exactly ten claims.
const tightClaimSize = "1Ti"

// tightReservationTimeout sets the tight case's
// scheduler-extender-node-reservation-timeout, in seconds; empty keeps the
// setting's default (5). The ledger holds the reservation of a pod bound to
// its node until its replica is there (DESIGN rule 6), so the default holds
// however long Longhorn takes to attach a burst of volumes.
var tightReservationTimeout = flag.String("schedulerbench.reservation-timeout", "", "scheduler-extender-node-reservation-timeout for the tight case, in seconds; empty keeps the setting's default (5).")

var tightPods = flag.Int("schedulerbench.tight-pods", 0, "Pods of 1Ti each in the tight case; 0 is 11 per node, one more than a node holds.")

// BenchmarkTightCluster schedules more 1Ti pods than the nodes × 10Ti can
// hold (11 per node by default, one more than fits), all at once, through
// the extender, in the same sandbox as BenchmarkKubeSchedulerThroughput
// (Longhorn's own controllers): exactly ten land on each node, no ledger
// goes over its limit, and the rest stay Pending with the numbers. It
// reports how long the pods that fit took to bind.
func BenchmarkTightCluster(b *testing.B) {
	b.StopTimer()
	ctx := context.Background()
	sb, c, metricsURL := startSandbox(b)
	if *tightReservationTimeout != "" {
		setConfig(b, ctx, c, settings.SchedulerExtenderNodeReservationTimeout, *tightReservationTimeout)
	}
	n, fits := *tightPods, *nodeCount*10
	if n == 0 {
		n = *nodeCount * 11
	}
	for i := range b.N {
		ns := fmt.Sprintf("tight-%d", i)
		provision(b, ctx, sb, c, ns, n, tightClaimSize)
		reservationsBefore := readExtenderTimes(b, metricsURL)
		cpuBefore, err := readCPU(sb)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		if err := parallel(n, func(i int) error { return c.Create(ctx, pod(ns, i, throughExtender)) }); err != nil {
			b.Fatalf("creating the pods: %v", err)
		}
		var perNode map[string]int
		var unschedulable []corev1.Pod
		waitFor(b, ctx, sb, 15*time.Minute, fmt.Sprintf("%d pods are bound and %d reported unschedulable", fits, n-fits), func(ctx context.Context) (bool, string, error) {
			list := &corev1.PodList{}
			if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
				return false, "", err
			}
			perNode, unschedulable = map[string]int{}, nil
			for _, p := range list.Items {
				if p.Spec.NodeName != "" {
					perNode[p.Spec.NodeName]++
				} else if failure(&p) != "" {
					unschedulable = append(unschedulable, p)
				}
			}
			bound := 0
			for _, k := range perNode {
				bound += k
			}
			return bound+len(unschedulable) == n && bound >= fits, fmt.Sprintf("%d bound, %d unschedulable", bound, len(unschedulable)), nil
		})
		elapsed := time.Since(start)
		b.StopTimer()
		cpuAfter, err := readCPU(sb)
		if err != nil {
			b.Fatal(err)
		}
		cpu := cpuAfter.sub(cpuBefore)
		b.ReportMetric(float64(fits)/elapsed.Seconds(), "bound-pods/s")
		counts := map[int]int{}
		for _, k := range perNode {
			counts[k]++
		}
		if len(perNode) != *nodeCount || counts[10] != *nodeCount {
			b.Errorf("pods per node: %v nodes hold k pods (%v), want all %d nodes with 10", counts, perNode, *nodeCount)
		}
		if len(unschedulable) != n-fits {
			b.Errorf("%d pods unschedulable, want %d", len(unschedulable), n-fits)
		}
		if len(unschedulable) == 0 {
			b.Fatalf("no pod reported unschedulable; pods per node %v", perNode)
		}
		msg := failure(&unschedulable[0])
		if !strings.Contains(msg, "Ti") && !strings.Contains(msg, "Gi") {
			b.Errorf("an unschedulable pod's reason has no numbers: %s", msg)
		}
		report(b, "%s: %d pods bound in %s (10 on each of %d nodes), %d Pending, e.g. %s: %s", ns, fits, elapsed.Round(time.Millisecond),
			len(perNode), len(unschedulable), unschedulable[0].Name, msg)
		report(b, "%s: while the pods were created and scheduled: %s", ns, cpu.describe(elapsed, runtime.NumCPU()))
		checkLedgers(b, ctx, c)

		// Longhorn then attaches the volumes of the pods that fit and
		// places their replicas; the ledgers hand the reservations over.
		watchCtx, stopWatch := context.WithCancel(ctx)
		ledgers := followLedgers(watchCtx, b, c, ns)
		runStart := time.Now()
		waitFor(b, ctx, sb, 10*time.Minute, fmt.Sprintf("the %d bound pods of %s run", fits, ns), func(ctx context.Context) (bool, string, error) {
			list := &corev1.PodList{}
			if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
				return false, "", err
			}
			running := 0
			for _, p := range list.Items {
				if p.Status.Phase == corev1.PodRunning {
					running++
				}
			}
			return running >= fits, fmt.Sprintf("%d running", running), nil
		})
		ran := time.Since(runStart)
		placed, reservations, settled := settleLonghorn(ctx, b, c, ledgers, ns, 3*time.Minute)
		stopWatch()
		report(b, "%s: reservations by result, until the pods that fit ran: %s", ns, readExtenderTimes(b, metricsURL).sub(reservationsBefore).describeReservations())
		report(b, "%s: the pods that fit ran %s after they were bound; Longhorn's replicas %s later: %s; the ledgers' reservations, as last seen from then on: %s",
			ns, ran.Round(100*time.Millisecond), settled.Round(time.Second), describeCounts(placed), describeCounts(reservations))
		checkLedgers(b, ctx, c)
	}
}

// failure returns the message of p's PodScheduled=False condition, or "".
func failure(p *corev1.Pod) string {
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse {
			return cond.Message
		}
	}
	return ""
}

// checkLedgers fails when a ledger breaks its invariant (ledger.Violation)
// or ends over its limit.
func checkLedgers(b *testing.B, ctx context.Context, c client.Client) {
	b.Helper()
	list := &dsv1.DiskScheduleList{}
	if err := c.List(ctx, list, client.InNamespace(sandbox.Namespace)); err != nil {
		b.Fatal(err)
	}
	var broken []string
	for _, ds := range list.Items {
		if v := ledger.Violation(ds.Status); v != "" {
			broken = append(broken, fmt.Sprintf("%s: %s", ds.Name, v))
		}
		// Nothing is adopted here: not even an Overcommitted ledger may end
		// over its limit.
		if ds.Status.StorageScheduled > ds.Status.StorageLimit {
			broken = append(broken, fmt.Sprintf("%s: %d > %d", ds.Name, ds.Status.StorageScheduled, ds.Status.StorageLimit))
		}
	}
	sort.Strings(broken)
	if len(broken) > 0 {
		b.Errorf("ledgers break their invariant or end over their limit: %v", broken)
	}
}

// setConfig sets key to value in the extender's ConfigMap.
func setConfig(b *testing.B, ctx context.Context, c client.Client, key, value string) {
	b.Helper()
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: settings.ConfigMapName}, cm); err != nil {
		b.Fatal(err)
	}
	patch := client.MergeFrom(cm.DeepCopy())
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[key] = value
	if err := c.Patch(ctx, cm, patch); err != nil {
		b.Fatalf("setting %s in ConfigMap %s: %v", key, cm.Name, err)
	}
}
