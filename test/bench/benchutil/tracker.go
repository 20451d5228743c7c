package benchutil

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

// Tracker follows every DiskSchedule version an informer of a benchmark
// delivers (Observe): it counts the ledgers' status writes, wakes writers
// waiting for a decision (Await) and, when it times requests, records when
// each replica's request first appeared in a ledger's spec and when the
// decision on it first appeared in the status (Times). Its watch is as late
// as a requester's own informer, so its times split a write's latency into
// the request's write, the decision and the wake-up.
type Tracker struct {
	mu sync.Mutex
	// latest is the last version seen of each ledger.
	latest map[string]*dsv1.DiskSchedule
	// timed says whether requested and decided are kept.
	timed              bool
	requested, decided map[string]time.Time
	waiters            map[string]map[string]*waiter // disk → replica → waiter
	statusWrites       int
}

// waiter is a writer waiting for the decision on its request.
type waiter struct {
	size, generation int64
	done             chan time.Time
}

// NewTracker returns an empty Tracker; timed makes it record when each
// replica's request and its decision were first seen (Times), which costs
// a pass over a ledger's entries per version.
func NewTracker(timed bool) *Tracker {
	return &Tracker{latest: map[string]*dsv1.DiskSchedule{}, timed: timed,
		requested: map[string]time.Time{}, decided: map[string]time.Time{}, waiters: map[string]map[string]*waiter{}}
}

// Observe records one DiskSchedule version (an informer's add or update;
// anything else is ignored). A new version with an unchanged generation is
// a status write: nothing else writes these objects' metadata during a run.
func (t *Tracker) Observe(obj any) {
	ds, ok := obj.(*dsv1.DiskSchedule)
	if !ok {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if prev := t.latest[ds.Name]; prev != nil && prev.ResourceVersion != ds.ResourceVersion && prev.Generation == ds.Generation {
		t.statusWrites++
	}
	t.latest[ds.Name] = ds
	if t.timed {
		for name, size := range ds.Spec.Replicas {
			if _, ok := t.requested[name]; !ok {
				t.requested[name] = now
			}
			if _, ok := t.decided[name]; !ok {
				if st, ok := ds.Status.Replicas[name]; ok && st.RequestedSize == int64(size) {
					t.decided[name] = now
				}
			}
		}
	}
	for name, w := range t.waiters[ds.Name] {
		if decidedAt(ds, name, w.size, w.generation) {
			w.done <- now
			delete(t.waiters[ds.Name], name)
		}
	}
}

// decidedAt reports whether ds holds the decision on the replica request
// name at size, written at generation.
func decidedAt(ds *dsv1.DiskSchedule, name string, size, generation int64) bool {
	if e, ok := ds.Status.Replicas[name]; ok && e.RequestedSize == size {
		return true
	}
	return ds.Status.ObservedGeneration >= generation
}

// Await returns when the tracker saw the decision on the replica request
// name of size bytes on the ledger disk, written at generation. A decision
// seen before Await was called counts from now, which overstates its
// latency slightly rather than understating it.
func (t *Tracker) Await(ctx context.Context, disk, name string, size, generation int64) (time.Time, error) {
	t.mu.Lock()
	if ds := t.latest[disk]; ds != nil && decidedAt(ds, name, size, generation) {
		t.mu.Unlock()
		return time.Now(), nil
	}
	w := &waiter{size: size, generation: generation, done: make(chan time.Time, 1)}
	if t.waiters[disk] == nil {
		t.waiters[disk] = map[string]*waiter{}
	}
	t.waiters[disk][name] = w
	t.mu.Unlock()
	select {
	case at := <-w.done:
		return at, nil
	case <-ctx.Done():
		t.mu.Lock()
		delete(t.waiters[disk], name)
		t.mu.Unlock()
		return time.Time{}, ctx.Err()
	}
}

// Times returns when the replica's request and the decision on it were
// first seen; zero times when they were not, or the tracker is not timed.
func (t *Tracker) Times(replica string) (requested, decided time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.requested[replica], t.decided[replica]
}

// StatusWrites returns the ledger status writes seen since the tracker
// started or ResetStatusWrites.
func (t *Tracker) StatusWrites() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.statusWrites
}

// ResetStatusWrites starts the count of status writes again.
func (t *Tracker) ResetStatusWrites() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.statusWrites = 0
}

// Track starts an informer cache on namespace of the API server cfg names
// whose DiskSchedule versions feed t, and whose updates of each object kind
// in updates go to that kind's function; it returns once the cache has
// synced, with the function that stops it.
func (t *Tracker) Track(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, namespace string,
	updates map[client.Object]func(any)) (stop func(), err error) {
	informers, err := cache.New(cfg, cache.Options{Scheme: scheme, DefaultNamespaces: map[string]cache.Config{namespace: {}}})
	if err != nil {
		return nil, fmt.Errorf("creating the DiskSchedule cache: %w", err)
	}
	cctx, cancel := context.WithCancel(context.Background())
	defer func() {
		if err != nil {
			cancel()
		}
	}()
	inf, err := informers.GetInformer(cctx, &dsv1.DiskSchedule{})
	if err != nil {
		return nil, fmt.Errorf("getting the DiskSchedule informer: %w", err)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    t.Observe,
		UpdateFunc: func(_, obj any) { t.Observe(obj) },
	}); err != nil {
		return nil, fmt.Errorf("watching DiskSchedules: %w", err)
	}
	for obj, update := range updates {
		inf, err := informers.GetInformer(cctx, obj)
		if err != nil {
			return nil, fmt.Errorf("getting the informer of %T: %w", obj, err)
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{UpdateFunc: func(_, obj any) { update(obj) }}); err != nil {
			return nil, fmt.Errorf("watching %T: %w", obj, err)
		}
	}
	go func() { _ = informers.Start(cctx) }()
	if !informers.WaitForCacheSync(ctx) {
		return nil, errors.New("the DiskSchedule cache did not sync")
	}
	return cancel, nil
}
