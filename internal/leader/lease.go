package leader

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// DefaultRenewInterval is how often a leader renews its Lease when the
// manager keeps controller-runtime's default RetryPeriod.
const DefaultRenewInterval = 2 * time.Second

// Lease follows the leader-election Lease as the cache delivers it and
// tells whether a leader is deciding. It is safe for concurrent use.
type Lease struct {
	name       string
	renewEvery time.Duration
	clock      clock.PassiveClock
	log        logr.Logger

	mu sync.Mutex
	// holder and renewed are the Lease's holderIdentity and renewTime as
	// last seen; duration its leaseDurationSeconds.
	holder   string
	renewed  metav1.MicroTime
	duration time.Duration
	// seen is when, on clk, a renewal was last seen.
	seen time.Time
	// news is closed, and replaced, whenever the Lease changes.
	news chan struct{}
	// synced reports whether the cache delivered the Lease's state.
	synced func() bool

	// self is this replica's identity, and probe asks a holder that is
	// not self whether it still decides (nil: never asked).
	self  string
	probe func(ctx context.Context, holder string) (Verdict, error)
	// probing is the holder a probe is under way for; probed is when the
	// last probe of probedHolder began, and gone whether it found that
	// holder gone.
	probing      bool
	probedHolder string
	probed       time.Time
	gone         bool
	goneWhy      string
}

// NewLease returns the follower of the Lease named name: its leader renews
// it every renewEvery (the manager's RetryPeriod; DefaultRenewInterval when
// not positive), and clk times the renewals seen.
func NewLease(name string, renewEvery time.Duration, clk clock.PassiveClock, log logr.Logger) *Lease {
	if renewEvery <= 0 {
		renewEvery = DefaultRenewInterval
	}
	return &Lease{name: name, renewEvery: renewEvery, clock: clk, log: log, news: make(chan struct{})}
}

// WithProbe makes l ask a holder other than self whether it still decides
// when Suspect is called (Prober.Probe); self is this replica's identity.
func (l *Lease) WithProbe(self string, probe func(ctx context.Context, holder string) (Verdict, error)) *Lease {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.self, l.probe = self, probe
	return l
}

// Deciding reports whether a leader decides now, until when it counts as
// deciding should no news come (zero when it does not decide), and a
// channel closed at the Lease's next change or probe verdict.
func (l *Lease) Deciding() (bool, time.Time, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	until := l.seen.Add(window(l.renewEvery, l.duration))
	if !deciding(l.holder, until, l.clock.Now()) || l.probedGone() {
		return false, time.Time{}, l.news
	}
	return true, until, l.news
}

// Why says why no leader decides, in words: no holder, a holder whose
// renewals stopped (and since when), or one found gone at its address.
func (l *Lease) Why() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	switch {
	case l.holder == "":
		return fmt.Sprintf("the leader-election Lease %s has no holder", l.name)
	case l.probedGone():
		return fmt.Sprintf("the Lease's holder %s is gone: %s", l.holder, l.goneWhy)
	case !deciding(l.holder, l.seen.Add(window(l.renewEvery, l.duration)), now):
		return fmt.Sprintf("the Lease's holder %s stopped renewing it: no renewal seen for %s (it renews every %s)",
			l.holder, now.Sub(l.seen).Round(time.Millisecond), l.renewEvery)
	default:
		return fmt.Sprintf("the Lease's holder %s renews it", l.holder)
	}
}

// probedGone reports whether the last probe found the current holder gone
// and no renewal was seen since it began. Called with mu held.
func (l *Lease) probedGone() bool {
	return l.gone && l.probedHolder == l.holder && !l.seen.After(l.probed)
}

// minProbeInterval is how often, at most, one holder is probed.
const minProbeInterval = 250 * time.Millisecond

// Suspect asks the holder, in the background, whether it still decides,
// when a write has waited without a decision: a holder found gone stops
// counting as deciding until its next renewal, and Deciding's channel is
// closed when the verdict is in. It does nothing when this replica holds
// the Lease, no probe is set, one is under way, or the holder was probed
// less than minProbeInterval ago.
func (l *Lease) Suspect() {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	if l.probe == nil || l.holder == "" || l.holder == l.self || l.probing ||
		(l.probedHolder == l.holder && now.Sub(l.probed) < minProbeInterval) {
		return
	}
	holder := l.holder
	l.probing, l.probedHolder, l.probed, l.gone = true, holder, now, false
	go func() {
		verdict, err := l.probe(context.Background(), holder)
		l.mu.Lock()
		defer l.mu.Unlock()
		l.probing = false
		if l.probedHolder != holder {
			return
		}
		l.gone = verdict == Gone
		if l.gone {
			l.goneWhy = fmt.Sprint(err)
			l.log.Info("The Lease's holder is gone: writes are answered without waiting for its renewal to lapse",
				"lease", l.name, "holder", holder, "reason", err)
			close(l.news)
			l.news = make(chan struct{})
		} else if err != nil {
			l.log.V(1).Info("Probing the Lease's holder", "lease", l.name, "holder", holder, "verdict", verdict, "reason", err)
		}
	}()
}

// heldBy reports whether identity holds the Lease and counts as deciding
// on this replica's view.
func (l *Lease) heldBy(identity string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	until := l.seen.Add(window(l.renewEvery, l.duration))
	return l.holder == identity && deciding(l.holder, until, l.clock.Now())
}

// deciding is the rule: a holder whose renewal was seen recently enough
// that it counts as deciding until until.
func deciding(holder string, until, now time.Time) bool {
	return holder != "" && now.Before(until)
}

// window is how long after a renewal was seen its holder counts as
// deciding: one and a half renewal intervals, at most the lease duration
// (when known).
func window(renewEvery, leaseDuration time.Duration) time.Duration {
	w := renewEvery * 3 / 2
	if leaseDuration > 0 && leaseDuration < w {
		w = leaseDuration
	}
	return w
}

// Ready reports an error until the cache delivered the Lease's state.
func (l *Lease) Ready() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.synced == nil || !l.synced() {
		return fmt.Errorf("the leader-election Lease %s is not followed yet", l.name)
	}
	return nil
}

// observe records the Lease as the cache delivers it (nil: deleted).
func (l *Lease) observe(lease *coordinationv1.Lease) {
	if lease != nil && lease.Name != l.name {
		return
	}
	holder, renewed, duration := "", metav1.MicroTime{}, time.Duration(0)
	if lease != nil {
		holder = ptr.Deref(lease.Spec.HolderIdentity, "")
		renewed = ptr.Deref(lease.Spec.RenewTime, metav1.MicroTime{})
		duration = time.Duration(ptr.Deref(lease.Spec.LeaseDurationSeconds, 0)) * time.Second
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if holder == l.holder && renewed.Equal(&l.renewed) && duration == l.duration {
		return
	}
	if holder != l.holder {
		l.log.Info("Leader changed", "lease", l.name, "holder", holder, "previous", l.holder)
	}
	if holder != "" {
		l.seen = l.clock.Now()
	}
	l.holder, l.renewed, l.duration = holder, renewed, duration
	close(l.news)
	l.news = make(chan struct{})
}

// Handler returns the informer event handler that feeds l.
func (l *Lease) Handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { l.observeObject(obj, false) },
		UpdateFunc: func(_, obj any) { l.observeObject(obj, false) },
		DeleteFunc: func(obj any) { l.observeObject(obj, true) },
	}
}

func (l *Lease) observeObject(obj any, deleted bool) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	lease, ok := obj.(*coordinationv1.Lease)
	if !ok || lease.Name != l.name {
		return
	}
	if deleted {
		lease = nil
	}
	l.observe(lease)
}

// Watch is the runnable that subscribes l to the Lease informer of c once
// the cache runs. It runs on every replica.
type Watch struct {
	Lease *Lease
	Cache cache.Cache
}

// NeedLeaderElection is false: every replica serves the gate.
func (Watch) NeedLeaderElection() bool { return false }

// Start adds the informer handler and returns.
func (w Watch) Start(ctx context.Context) error {
	informer, err := w.Cache.GetInformer(ctx, &coordinationv1.Lease{})
	if err != nil {
		return fmt.Errorf("getting the Lease informer: %w", err)
	}
	reg, err := informer.AddEventHandler(w.Lease.Handler())
	if err != nil {
		return fmt.Errorf("following the leader-election Lease %s: %w", w.Lease.name, err)
	}
	w.Lease.mu.Lock()
	w.Lease.synced = reg.HasSynced
	w.Lease.mu.Unlock()
	return nil
}
