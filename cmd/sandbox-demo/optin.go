package main

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/longhorn/diskschedule/internal/metrics"
	"github.com/longhorn/diskschedule/test/framework/scenario"
)

// podWebhookLatency is the pod opt-in webhook's latency histogram, which
// the sandboxes' in-process managers register with controller-runtime's
// registry.
const podWebhookLatency = "longhorn_diskschedule_pod_webhook_duration_seconds"

// optIn runs the race once more in a sandbox with the second scheduler:
// the StatefulSet written without the extender's resource, in a namespace
// labelled diskschedule.longhorn.io/extender=enabled, so the pod opt-in
// webhook sends its pods through the second scheduler, kube-scheduler with
// the diskschedule plugin;
// then a pod with a Longhorn claim in an unlabelled namespace, which must
// be stored as written. It reports both and the webhook's p99 latency.
func (d *demo) optIn(ctx context.Context, cl *cluster) error {
	o := d.common("race-opt-in")
	res, err := scenario.OptInRace(ctx, cl.c, scenario.RaceOptions{Common: o, Pods: 16, Size: "100Gi"})
	if err != nil {
		return err
	}
	d.check("race opted in by namespace", res.Result)
	if res.OptedIn != 16 || len(res.NotOptedIn) > 0 {
		d.broken = append(d.broken, fmt.Sprintf("race opted in by namespace: %d of 16 pods opted in; not: %s", res.OptedIn, strings.Join(res.NotOptedIn, "; ")))
	}
	if err := d.cleanup(ctx, cl, o); err != nil {
		return err
	}
	plain := d.common("opt-in-unlabelled")
	_, given, err := scenario.UnlabelledPod(ctx, cl.c, plain)
	if err != nil {
		return err
	}
	if given != "" {
		d.broken = append(d.broken, "a pod in an unlabelled namespace was given "+given)
	}
	if err := d.cleanup(ctx, cl, plain); err != nil {
		return err
	}
	p99, n, err := metrics.HistogramQuantile(ctrlmetrics.Registry, podWebhookLatency, 0.99)
	if err != nil {
		return err
	}
	p50, _, err := metrics.HistogramQuantile(ctrlmetrics.Registry, podWebhookLatency, 0.5)
	if err != nil {
		return err
	}
	d.reportOptIn(res, given, p50, p99, n)
	return nil
}

// reportOptIn prints the opt-in race and adds its summary line.
func (d *demo) reportOptIn(res scenario.OptInRaceResult, given string, p50, p99 float64, answered uint64) {
	d.section("6. Opt-in by namespace: the race written without the extender's resource, through a second scheduler",
		wrap("The StatefulSet of the race is written as an application's chart writes it, without "+
			"longhorn.io/scheduler-extender, in a namespace labelled diskschedule.longhorn.io/extender=enabled. "+
			"The pod opt-in webhook (diskschedule-pods) gives each pod the resource and the scheduler "+
			"diskschedule-scheduler, a second scheduler (kube-scheduler with the diskschedule plugin compiled in, "+
			"configured as the chart's scheduler.enabled deploys it), whose plugin places them and reserves their space "+
			"before it binds them, as on a managed cluster whose own kube-scheduler cannot be configured.", 86)...)
	latency := "no answer measured"
	if answered > 0 && !math.IsNaN(p99) {
		latency = fmt.Sprintf("%s (p50 %s) over %d pods", time.Duration(p99*float64(time.Second)).Round(100*time.Microsecond),
			time.Duration(p50*float64(time.Second)).Round(100*time.Microsecond), answered)
	}
	unlabelled := "left as written"
	if given != "" {
		unlabelled = "given " + given
	}
	for _, row := range [][2]string{
		{"pods per node", res.Distribution()},
		{"pods given the resource and the second scheduler", fmt.Sprintf("%d of %d", res.OptedIn, res.OptedIn+len(res.NotOptedIn))},
		{"time until every pod has a node", seconds(res.TimeToAllScheduled)},
		{"time until the StatefulSet is ready", seconds(res.TimeToReady)},
		{"pods whose data is on another node", fmt.Sprint(len(res.RemoteData))},
		{"a pod with a Longhorn claim in an unlabelled namespace", unlabelled},
		{"the pod webhook's latency, p99", latency},
	} {
		fmt.Fprintf(d.out, "  %-56s %s\n", row[0], row[1])
	}
	d.summaries = append(d.summaries, fmt.Sprintf("Opt-in by namespace: the race written without the extender's resource got %s through the second scheduler "+
		"(%d pods given the resource and diskschedule-scheduler by the pod webhook, p99 %s); a pod in an unlabelled namespace was %s.",
		res.Distribution(), res.OptedIn, latency, unlabelled))
}
