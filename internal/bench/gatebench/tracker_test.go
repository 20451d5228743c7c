package gatebench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/sandbox"
)

// tracker follows every DiskSchedule version an informer of the benchmark
// delivers and records, per replica, when its request first appeared in a
// ledger's spec and when its decision first appeared in the status; and
// counts the ledgers' status writes. Its watch is as late as the gate's own
// informer, so the differences between its times split a write's latency
// into the gate's ledger write, the DiskSchedule controller's decision and
// the gate's wake-up.
type tracker struct {
	mu sync.Mutex
	// generation and resourceVersion are the last version seen, per ledger.
	generation      map[string]int64
	resourceVersion map[string]string
	requested       map[string]time.Time
	decided         map[string]time.Time
	statusWrites    int
}

func newTracker() *tracker {
	return &tracker{
		generation: map[string]int64{}, resourceVersion: map[string]string{},
		requested: map[string]time.Time{}, decided: map[string]time.Time{},
	}
}

// startTracker starts an informer on the sandbox's DiskSchedules feeding
// the cluster's tracker.
func (c *cluster) startTracker(ctx context.Context) error {
	informers, err := cache.New(c.sb.AdminConfig(), cache.Options{
		Scheme:            c.sb.Scheme(),
		DefaultNamespaces: map[string]cache.Config{sandbox.Namespace: {}},
	})
	if err != nil {
		return fmt.Errorf("creating the DiskSchedule cache: %w", err)
	}
	cctx, cancel := context.WithCancel(context.Background())
	c.stopTracker = cancel
	inf, err := informers.GetInformer(cctx, &dsv1.DiskSchedule{})
	if err != nil {
		return fmt.Errorf("getting the DiskSchedule informer: %w", err)
	}
	c.tracker = newTracker()
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.tracker.observe(obj) },
		UpdateFunc: func(_, obj any) { c.tracker.observe(obj) },
	}); err != nil {
		return fmt.Errorf("watching DiskSchedules: %w", err)
	}
	go func() { _ = informers.Start(cctx) }()
	if !informers.WaitForCacheSync(ctx) {
		return errors.New("the DiskSchedule cache did not sync")
	}
	return nil
}

// observe records one DiskSchedule version.
func (t *tracker) observe(obj any) {
	ds, ok := obj.(*dsv1.DiskSchedule)
	if !ok {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if rv, seen := t.resourceVersion[ds.Name]; seen && rv != ds.ResourceVersion && t.generation[ds.Name] == ds.Generation {
		t.statusWrites++
	}
	t.resourceVersion[ds.Name], t.generation[ds.Name] = ds.ResourceVersion, ds.Generation
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

// times returns when the replica's request and its decision were first
// seen; zero times when they were not.
func (t *tracker) times(replica string) (requested, decided time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.requested[replica], t.decided[replica]
}

// writes returns the ledger status writes seen so far.
func (t *tracker) writes() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.statusWrites
}
