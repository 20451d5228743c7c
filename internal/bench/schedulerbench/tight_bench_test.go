package schedulerbench

import (
	"context"
	"flag"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/sandbox"
)

// tightClaimSize fills a 10Ti disk with exactly ten claims.
const tightClaimSize = "1Ti"

var tightPods = flag.Int("schedulerbench.tight-pods", 1100, "Pods of 1Ti each in the tight case (100 nodes hold 1000).")

// BenchmarkTightCluster schedules more 1Ti pods than the 100 nodes × 10Ti
// can hold, all at once, through the extender: exactly ten land on each
// node, no ledger goes over its limit, and the rest stay Pending with the
// numbers. It reports how long the pods that fit took to bind.
func BenchmarkTightCluster(b *testing.B) {
	b.StopTimer()
	ctx := context.Background()
	sb, _ := startSandbox(b, ctx)
	cfg := sb.AdminConfig()
	cfg.QPS, cfg.Burst = 2000, 4000
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: sb.Scheme()})
	if err != nil {
		b.Fatal(err)
	}
	n, fits := *tightPods, nodeCount*10
	for i := range b.N {
		ns := fmt.Sprintf("tight-%d", i)
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			b.Fatal(err)
		}
		if err := parallel(n, func(i int) error { return c.Create(ctx, claim(ns, i, tightClaimSize)) }); err != nil {
			b.Fatalf("creating the claims: %v", err)
		}
		waitFor(b, ctx, sb, 10*time.Minute, "every claim is bound", func(ctx context.Context) (bool, string, error) {
			list := &corev1.PersistentVolumeClaimList{}
			if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
				return false, "", err
			}
			bound := 0
			for _, pvc := range list.Items {
				if pvc.Status.Phase == corev1.ClaimBound {
					bound++
				}
			}
			return bound == n, fmt.Sprintf("%d bound", bound), nil
		})
		b.StartTimer()
		start := time.Now()
		if err := parallel(n, func(i int) error { return c.Create(ctx, pod(ns, i, true)) }); err != nil {
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
			return bound >= fits && len(unschedulable) >= n-fits, fmt.Sprintf("%d bound, %d unschedulable", bound, len(unschedulable)), nil
		})
		elapsed := time.Since(start)
		b.StopTimer()
		b.ReportMetric(float64(fits)/elapsed.Seconds(), "bound-pods/s")
		counts := map[int]int{}
		for _, k := range perNode {
			counts[k]++
		}
		if len(perNode) != nodeCount || counts[10] != nodeCount {
			b.Errorf("pods per node: %v nodes hold k pods (%v), want all %d nodes with 10", counts, perNode, nodeCount)
		}
		if len(unschedulable) != n-fits {
			b.Errorf("%d pods unschedulable, want %d", len(unschedulable), n-fits)
		}
		msg := failure(&unschedulable[0])
		if !strings.Contains(msg, "Ti") && !strings.Contains(msg, "Gi") {
			b.Errorf("an unschedulable pod's reason has no numbers: %s", msg)
		}
		b.Logf("%s: %d pods bound in %s (10 on each of %d nodes), %d Pending, e.g. %s: %s", ns, fits, elapsed.Round(time.Millisecond),
			len(perNode), len(unschedulable), unschedulable[0].Name, msg)
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

// checkLedgers fails when a ledger grants more than its limit.
func checkLedgers(b *testing.B, ctx context.Context, c client.Client) {
	b.Helper()
	list := &dsv1.DiskScheduleList{}
	if err := c.List(ctx, list, client.InNamespace(sandbox.Namespace)); err != nil {
		b.Fatal(err)
	}
	var over []string
	for _, ds := range list.Items {
		if ds.Status.StorageScheduled > ds.Status.StorageLimit {
			over = append(over, fmt.Sprintf("%s %d > %d", ds.Name, ds.Status.StorageScheduled, ds.Status.StorageLimit))
		}
	}
	sort.Strings(over)
	if len(over) > 0 {
		b.Errorf("ledgers over their limit: %v", over)
	}
}
