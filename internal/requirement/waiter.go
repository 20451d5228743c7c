package requirement

import (
	"sync"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Waiter wakes the requests waiting on a DiskSchedule whenever the informer
// delivers a new version of it, so no request polls the API.
type Waiter struct {
	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{}
}

// NewWaiter returns a Waiter with no subscriber.
func NewWaiter() *Waiter {
	return &Waiter{subs: map[string]map[chan struct{}]struct{}{}}
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

// Handler returns the informer event handler that feeds the waiter.
func (w *Waiter) Handler() toolscache.ResourceEventHandler {
	wake := func(obj interface{}) {
		if o, ok := obj.(client.Object); ok {
			w.notify(o.GetName())
		}
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { wake(obj) },
		UpdateFunc: func(_, obj interface{}) { wake(obj) },
	}
}
