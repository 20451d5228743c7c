package extender

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/longhorn/diskschedule/internal/metrics"
	"github.com/longhorn/diskschedule/internal/placement"
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
	Clock     clock.WithTicker
	Metrics   *metrics.Extender
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
// volumes, and reserves the space of the node kube-scheduler chose.
type Extender struct {
	opts     Options
	resolver resolver
	settings *liveSettings

	// mu guards the view, the overlay and what follows them: a filter reads
	// the ledgers and the pods in flight under it, and an entry is dropped
	// only under it once the view shows its reservation.
	mu      sync.Mutex
	view    *view
	overlay *overlay
	// last is the filter's most recent answer, which prioritize reuses.
	last lastFilter
	// fenceUntil: filters are refused until then (leader takeover). Read
	// by every filter without taking mu.
	fenceUntil atomic.Pointer[time.Time]
	// written are reservations written and not yet seen decided, by disk
	// UUID then volume, for the metrics.
	written map[string]map[string]string
	// lapsed are the pods whose entries expired before their node was
	// known, by UID, with when: bound later, they are tracked again.
	lapsed map[types.UID]time.Time
	// writes is the queue of disk UUIDs whose reservations are to be
	// written; nil while the extender is not running.
	writes writeQueue
	// background carries the logger of the running extender.
	background context.Context
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
	return &Extender{
		opts:       opts,
		resolver:   resolver{client: opts.Client, namespace: opts.Namespace},
		settings:   newLiveSettings(opts.Client, opts.Namespace),
		view:       newView(),
		overlay:    newOverlay(),
		written:    map[string]map[string]string{},
		lapsed:     map[types.UID]time.Time{},
		background: context.Background(),
	}
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
	vols, err := e.resolver.localVolumes(ctx, pod)
	if err != nil {
		return nil, nil, err
	}
	if len(vols) == 0 {
		return candidates, nil, nil // no volume ties the pod to a node
	}
	if node := restartNode(vols, candidates); node != "" {
		e.mu.Lock()
		e.overlay.drop(pod.UID)
		e.mu.Unlock()
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
		e.mu.Lock()
		passed, failed, blocked, changed := e.decide(pod, vols, candidates, sched)
		if len(passed) > 0 || blocked == 0 || !e.opts.Clock.Now().Before(deadline) {
			e.mu.Unlock()
			if waited {
				e.opts.Metrics.FilterWait.WithLabelValues(fmt.Sprint(len(passed) > 0)).Observe(e.opts.Clock.Since(start).Seconds())
			}
			return passed, failed, nil
		}
		e.mu.Unlock()
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
// overlay, and changed is closed when the overlay next changes. Called with
// e.mu held.
func (e *Extender) decide(pod *corev1.Pod, vols []podVolume, candidates []string, sched settings.Scheduling) (
	passed []string, failed map[string]string, blocked int, changed <-chan struct{}) {
	e.overlay.drop(pod.UID) // a new scheduling cycle of the same pod
	fits := e.evaluateAll(pod, vols, candidates, sched, withOverlay|withRoomElsewhere)
	failed = map[string]string{}
	for _, name := range candidates {
		if f := fits[name]; f.OK {
			passed = append(passed, name)
		} else {
			failed[name] = f.Reason
		}
	}
	e.last = lastFilter{uid: pod.UID, vols: vols, fits: fits}
	ctrl.LoggerFrom(e.background).V(1).Info("Filtered a pod", "pod", client.ObjectKeyFromObject(pod), "passed", passed, "failed", failed, "podsInFlight", e.overlay.len())
	if len(passed) > 0 {
		if sched.PodSchedulingTimeout > 0 {
			e.track(pod, vols, fits)
		}
		return passed, failed, 0, nil
	}
	if e.overlay.len() == 0 {
		return nil, failed, 0, nil
	}
	alone := e.evaluateAll(pod, vols, candidates, sched, withRoomElsewhere)
	for _, name := range candidates {
		if alone[name].OK {
			blocked++
			failed[name] += fmt.Sprintf(" (counting %d pods being scheduled whose space is not in the ledgers yet)", e.overlay.len())
		}
	}
	return nil, failed, blocked, e.overlay.changed
}

// track records pod in flight on the nodes where it fits and needs new
// space. Called with e.mu held.
func (e *Extender) track(pod *corev1.Pod, vols []podVolume, fits map[string]fit) {
	entry := &inflight{
		pod:      types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name},
		uid:      pod.UID,
		claims:   claimNames(pod),
		offered:  map[string]fit{},
		filtered: e.opts.Clock.Now(),
	}
	for node, f := range fits {
		if f.OK && len(f.Assignment) > 0 {
			entry.offered[node] = f
		}
	}
	if len(entry.offered) == 0 {
		return
	}
	e.overlay.add(entry)
	e.opts.Metrics.InFlight.Set(float64(e.overlay.len()))
}

// Prioritize scores the candidate nodes 0–10: the node holding replicas of
// every volume scores highest, then nodes with the most space left after
// placing the pod's volumes. It reuses the pod's filter answer when it has
// one.
func (e *Extender) Prioritize(ctx context.Context, pod *corev1.Pod, candidates []string) (map[string]int64, error) {
	scores := map[string]int64{}
	e.mu.Lock()
	last := e.last
	e.mu.Unlock()
	vols, fits := last.vols, last.fits
	if last.uid != pod.UID || !covers(fits, candidates) {
		var err error
		if vols, err = e.resolver.localVolumes(ctx, pod); err != nil {
			return nil, err
		}
		fits = nil
	}
	if len(vols) == 0 {
		return scores, nil
	}
	if node := restartNode(vols, candidates); node != "" {
		scores[node] = 10
		return scores, nil
	}
	if fits == nil {
		sched, err := e.settings.get(ctx)
		if err != nil {
			return nil, err
		}
		e.mu.Lock()
		fits = e.evaluateAll(pod, vols, candidates, sched, withOverlay|withRoomElsewhere)
		e.mu.Unlock()
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
			scores[name] = 1 + f.Free*8/most
		}
		for _, v := range vols {
			if v.ReplicaNodes[name] {
				scores[name] = min(scores[name]+1, 10)
			}
		}
	}
	return scores, nil
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

// What evaluateAll counts besides the ledgers and the pod's local volumes.
const (
	// withOverlay takes off what the pods in flight claim.
	withOverlay = 1 << iota
	// withRoomElsewhere fails a node where the pod's volumes fit when
	// Longhorn would find no room for their other replicas (roomElsewhere).
	withRoomElsewhere
)

// evaluateAll evaluates every candidate node from the view, as how says.
// Called with e.mu held.
func (e *Extender) evaluateAll(pod *corev1.Pod, vols []podVolume, candidates []string, sched settings.Scheduling, how int) map[string]fit {
	var claimed func(string) int64
	if how&withOverlay != 0 && e.overlay.len() > 0 {
		claimed = e.overlay.demand
	}
	var cluster []placement.Node // every Longhorn node, read once when needed
	var seen placements
	podKey := pod.Namespace + "/" + pod.Name
	fits := make(map[string]fit, len(candidates))
	for _, name := range candidates {
		f := evaluateReading(vols, e.view.reading(name), claimed, sched, podKey, e.opts.Budget)
		if f.Steps > 0 {
			e.opts.Metrics.PackingSteps.Observe(float64(f.Steps))
			if !f.Exact {
				e.opts.Metrics.PackingFallbacks.Inc()
			}
		}
		if f.OK && how&withRoomElsewhere != 0 {
			if cluster == nil {
				cluster = e.view.placementNodes()
				seen = newPlacements(cluster)
			}
			if why := roomElsewhere(vols, name, cluster, sched, seen); why != "" {
				f = fit{Reason: why}
			}
		}
		fits[name] = f
	}
	return fits
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
