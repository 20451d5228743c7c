package requirement

import (
	"sync"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

// Waiter wakes the requests waiting on a DiskSchedule whenever the informer
// delivers a new version of it, so no request polls the API. It also
// notes when it last saw a decision on any ledger (a status the
// DiskSchedule controller wrote for a new generation, or with a new
// total): the sign that a leader is deciding.
type Waiter struct {
	clock clock.PassiveClock

	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{}
	// decided is when, on clock, a decision was last seen (zero: never).
	decided time.Time
}

// NewWaiter returns a Waiter with no subscriber; clk times the decisions
// it sees (nil: the real clock).
func NewWaiter(clk clock.PassiveClock) *Waiter {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Waiter{clock: clk, subs: map[string]map[chan struct{}]struct{}{}}
}

// subscribe returns a channel that receives after every change of the named
// DiskSchedule, and the function that ends the subscription. Subscribe
// before reading the cache, so no change is missed in between.
func (w *Waiter) subscribe(name string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.subs[name] == nil {
		w.subs[name] = map[chan struct{}]struct{}{}
	}
	w.subs[name][ch] = struct{}{}
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.subs[name], ch)
		if len(w.subs[name]) == 0 {
			delete(w.subs, name)
		}
	}
}

// notify wakes every subscriber of the named DiskSchedule; a subscriber that
// has not consumed its last wake-up keeps that one.
func (w *Waiter) notify(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.subs[name] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// LastDecision returns when the waiter last saw a decision on any ledger
// (zero: never).
func (w *Waiter) LastDecision() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.decided
}

// observe notes a decision when the ledger's status moved from old to cur:
// only the DiskSchedule controller of the leader writes it.
func (w *Waiter) observe(old, cur *dsv1.DiskSchedule) {
	if old.Status.ObservedGeneration == cur.Status.ObservedGeneration &&
		old.Status.StorageScheduled == cur.Status.StorageScheduled {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.decided = w.clock.Now()
}

// Handler returns the informer event handler that feeds the waiter.
func (w *Waiter) Handler() toolscache.ResourceEventHandler {
	wake := func(obj interface{}) {
		if o, ok := obj.(client.Object); ok {
			w.notify(o.GetName())
		}
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) { wake(obj) },
		UpdateFunc: func(oldObj, obj interface{}) {
			old, okOld := oldObj.(*dsv1.DiskSchedule)
			cur, okCur := obj.(*dsv1.DiskSchedule)
			if okOld && okCur {
				w.observe(old, cur)
			}
			wake(obj)
		},
	}
}
