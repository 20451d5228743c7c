package extender

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/metrics"
	"github.com/longhorn/diskschedule/internal/settings"
)

// volumeLabel is the label Longhorn puts on each Replica with its volume's
// name (longhorn-manager's types.LonghornLabelVolume).
const volumeLabel = "longhornvolume"

// DefaultFence is how long a new leader answers no filter after taking over
// from another: kube-scheduler's extender httpTimeout in config/scheduler.
const DefaultFence = 10 * time.Second

// Options configure an Extender.
type Options struct {
	// Client reads through the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server, not the cache: the leader Lease
	// at start and the extender's EndpointSlice.
	APIReader client.Reader
	// Informers is the manager's cache, whose events keep the extender's
	// view of the disks and tell it where pods went.
	Informers cache.Informers
	// Namespace is Longhorn's namespace.
	Namespace string
	// Config holds the extender's own settings (config.Store); required.
	Config  ConfigStore
	Clock   clock.WithTicker
	Metrics *metrics.Extender
	// Budget bounds the packing search per node.
	Budget int
	// Fence is how long a new leader answers no filter after taking over
	// from another, so the pods the old leader let through have bound: at
	// least kube-scheduler's extender httpTimeout.
	Fence time.Duration
	// Lease is the leader-election Lease. A leader that finds no earlier
	// holder recorded in it (no transitions) skips the fence.
	Lease types.NamespacedName
}

// Extender decides, for kube-scheduler, which nodes can hold a pod's
// volumes, and reserves the space of the node kube-scheduler chose. It
// reads the cluster through the manager's cache and writes; it decides
// with the pure evaluator (evaluate) on snapshots of its in-flight state
// (flight), which is what it holds between calls.
type Extender struct {
	opts     Options
	resolver resolver
	settings liveSettings
	flight   *flight
	// commits coalesces the writes of pods bound onto one disk at once.
	commits commits
	// background is the context of the running extender (Start), for the
	// work that outlives a call.
	background context.Context
	// last is the filter's most recent answer, which prioritize reuses.
	last atomic.Pointer[lastFilter]
	// fenceUntil: filters are refused until then (leader takeover). Read
	// by every filter without a lock.
	fenceUntil atomic.Pointer[time.Time]
}

// lastFilter is one pod's filter answer, for prioritize.
type lastFilter struct {
	uid  types.UID
	vols []podVolume
	fits map[string]fit
}

// New returns an Extender; it follows the cluster once Start runs.
func New(opts Options) *Extender {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	e := &Extender{
		opts:       opts,
		background: context.Background(),
		resolver:   resolver{client: opts.Client, namespace: opts.Namespace},
		settings:   liveSettings{reader: opts.Client, namespace: opts.Namespace, config: opts.Config, longhorn: &settingsCache{}},
	}
	e.flight = newFlight(opts.Clock, opts.Metrics)
	return e
}

// Filter returns the candidate nodes that can hold the pod's volumes and,
// for the others, why not. The pod's demand then counts against every node
// it passed until its node is known (the in-flight overlay). A filter waits
// only when the pods in flight alone keep the pod off every node, until one
// of them narrows or drops, for at most scheduler-extender-pod-scheduling-timeout.
func (e *Extender) Filter(ctx context.Context, pod *corev1.Pod, candidates []string) ([]string, map[string]string, error) {
	if err := e.fenced(); err != nil {
		e.opts.Metrics.FencedFilters.Inc()
		return nil, nil, err
	}
	sched, err := e.settings.get(ctx)
	if err != nil {
		return nil, nil, err
	}
	vols, err := e.resolver.localVolumes(ctx, pod, sched)
	if err != nil {
		return nil, nil, err
	}
	if len(vols) == 0 {
		return candidates, nil, nil // no volume ties the pod to a node
	}
	if node := restartNode(vols, candidates); node != "" {
		e.flight.forget(pod.UID)
		failed := map[string]string{}
		for _, c := range candidates {
			if c != node {
				failed[c] = fmt.Sprintf("node %s already holds a replica of every volume of the pod", node)
			}
		}
		return []string{node}, failed, nil
	}

	start := e.opts.Clock.Now()
	deadline := start.Add(sched.PodSchedulingTimeout)
	waited := false
	for {
		passed, failed, blocked, changed := e.decide(ctx, pod, vols, candidates, sched)
		if len(passed) > 0 || blocked == 0 || !e.opts.Clock.Now().Before(deadline) {
			if waited {
				e.opts.Metrics.FilterWait.WithLabelValues(fmt.Sprint(len(passed) > 0)).Observe(e.opts.Clock.Since(start).Seconds())
			}
			return passed, failed, nil
		}
		waited = true
		timer := e.opts.Clock.NewTimer(deadline.Sub(e.opts.Clock.Now()))
		select {
		case <-changed:
		case <-timer.C():
		case <-ctx.Done():
			timer.Stop()
			return nil, nil, fmt.Errorf("waiting for pods being scheduled to leave room: %w", ctx.Err())
		}
		timer.Stop()
	}
}

// decide evaluates the candidates against the ledgers less the overlay,
// records the pod in flight on the nodes it passed, and returns them. When
// none passes, blocked counts the nodes the pod would fit without the
// overlay, and changed is closed when the overlay next changes. It
// evaluates a snapshot without the in-flight state's lock, and again when
// the pods let through meanwhile claim more where this one would go.
func (e *Extender) decide(ctx context.Context, pod *corev1.Pod, vols []podVolume, candidates []string, sched settings.Scheduling) (
	passed []string, failed map[string]string, blocked int, changed <-chan struct{}) {
	q := question{pod: pod.Namespace + "/" + pod.Name, vols: vols, candidates: candidates, sched: sched,
		how: withOverlay | withRoomElsewhere, budget: e.opts.Budget}
	for {
		s := e.flight.snapshot(pod.UID) // a new scheduling cycle of the same pod
		fits := e.evaluate(s, q)
		passed, failed = nil, map[string]string{}
		for _, name := range candidates {
			if ft := fits[name]; ft.OK {
				passed = append(passed, name)
			} else {
				failed[name] = ft.Reason
			}
		}
		if len(passed) > 0 && sched.PodSchedulingTimeout > 0 && !e.flight.track(s, pod, fits) {
			continue // pods let through meanwhile claim more where this one would go
		}
		e.last.Store(&lastFilter{uid: pod.UID, vols: vols, fits: fits})
		ctrl.LoggerFrom(ctx).V(1).Info("Filtered a pod", "pod", client.ObjectKeyFromObject(pod), "passed", passed, "failed", failed, "podsInFlight", s.inFlight)
		if len(passed) > 0 || s.inFlight == 0 {
			return passed, failed, 0, nil
		}
		alone := q
		alone.how = withRoomElsewhere
		for name, ft := range e.evaluate(s, alone) {
			if ft.OK {
				blocked++
				failed[name] += fmt.Sprintf(" (counting %d pods being scheduled whose space is not in the ledgers yet)", s.inFlight)
			}
		}
		return nil, failed, blocked, s.changed
	}
}

// evaluate runs the evaluator on s and records its packing searches.
func (e *Extender) evaluate(s *snapshot, q question) map[string]fit {
	fits := evaluate(s, q)
	for _, ft := range fits {
		if ft.Steps > 0 {
			e.opts.Metrics.PackingSteps.Observe(float64(ft.Steps))
			if !ft.Exact {
				e.opts.Metrics.PackingFallbacks.Inc()
			}
		}
	}
	return fits
}

// Prioritize scores the candidate nodes 0–10: the node holding replicas of
// every volume scores highest, then nodes with the most space left after
// placing the pod's volumes. It reuses the pod's filter answer when it has
// one.
func (e *Extender) Prioritize(ctx context.Context, pod *corev1.Pod, candidates []string) (map[string]int64, error) {
	last := e.last.Load()
	if last == nil {
		last = &lastFilter{}
	}
	vols, fits := last.vols, last.fits
	if last.uid != pod.UID || !covers(fits, candidates) {
		sched, err := e.settings.get(ctx)
		if err != nil {
			return nil, err
		}
		if vols, err = e.resolver.localVolumes(ctx, pod, sched); err != nil {
			return nil, err
		}
		fits = nil
	}
	if len(vols) == 0 || restartNode(vols, candidates) != "" {
		return scoreNodes(vols, nil, candidates), nil // no evaluation needed
	}
	if fits == nil {
		sched, err := e.settings.get(ctx)
		if err != nil {
			return nil, err
		}
		fits = e.evaluate(e.flight.snapshot(""), question{pod: pod.Namespace + "/" + pod.Name, vols: vols, candidates: candidates,
			sched: sched, how: withOverlay | withRoomElsewhere, budget: e.opts.Budget})
	}
	return scoreNodes(vols, fits, candidates), nil
}

// scoreNodes is the prioritizer's rule, for the extender's prioritize and
// the diskschedule scheduler plugin's Score: 0–10 per candidate where fits
// lets vols through, the node holding a replica of every volume 10 alone
// (restartNode), else 1–9 by the space left after placing the pod's
// volumes (the most free highest: pods spread over the disks), one more
// for each volume with a replica there, at most 10.
func scoreNodes(vols []podVolume, fits map[string]fit, candidates []string) map[string]int64 {
	scores := map[string]int64{}
	if len(vols) == 0 {
		return scores
	}
	if node := restartNode(vols, candidates); node != "" {
		scores[node] = 10
		return scores
	}
	var most int64
	for _, name := range candidates {
		if f := fits[name]; f.OK && f.Free > most {
			most = f.Free
		}
	}
	for _, name := range candidates {
		f := fits[name]
		if !f.OK {
			continue
		}
		if most > 0 {
			scores[name] = 1 + ledger.MulDivSat(f.Free, 8, most)
		}
		for _, v := range vols {
			if v.ReplicaNodes[name] {
				scores[name] = min(scores[name]+1, 10)
			}
		}
	}
	return scores
}

// covers reports whether fits has an answer for every candidate.
func covers(fits map[string]fit, candidates []string) bool {
	for _, c := range candidates {
		if _, ok := fits[c]; !ok {
			return false
		}
	}
	return fits != nil
}

// fenced returns an error while a new leader waits for the pods the old
// one let through.
func (e *Extender) fenced() error {
	until := e.fenceUntil.Load()
	if until == nil {
		return nil
	}
	if now := e.opts.Clock.Now(); now.Before(*until) {
		return fmt.Errorf("the scheduler extender took over from another leader and answers from %s, once the pods that leader let through have bound (%s from now)",
			until.UTC().Format(time.RFC3339), until.Sub(now).Round(time.Millisecond))
	}
	return nil
}

// claimNames returns the names of the claims pod uses.
func claimNames(pod *corev1.Pod) []string {
	var out []string
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			out = append(out, v.PersistentVolumeClaim.ClaimName)
		}
	}
	return out
}
