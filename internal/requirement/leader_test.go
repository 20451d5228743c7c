package requirement

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/scheme"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

// fakeLeader is a Leader the test sets: deciding until until on clk.
type fakeLeader struct {
	clk      *clocktesting.FakeClock
	mu       sync.Mutex
	deciding bool
	until    time.Time
	news     chan struct{}
	// goneWhenAsked makes Suspect find the holder gone, as a probe
	// refused at its address does.
	goneWhenAsked bool
	suspected     int
}

func newFakeLeader(deciding bool, until time.Time) *fakeLeader {
	return &fakeLeader{deciding: deciding, until: until, news: make(chan struct{})}
}

func (l *fakeLeader) Deciding() (bool, time.Time, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deciding && l.clk.Now().Before(l.until), l.until, l.news
}

func (l *fakeLeader) Why() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.suspected > 0 && l.goneWhenAsked {
		return "the Lease's holder is gone: connection refused"
	}
	return "the Lease's holder stopped renewing it"
}

func (l *fakeLeader) Suspect() {
	l.mu.Lock()
	l.suspected++
	gone := l.goneWhenAsked && l.deciding
	l.mu.Unlock()
	if gone {
		l.set(false, time.Time{})
	}
}

// set changes the leader's state and tells the waiters.
func (l *fakeLeader) set(deciding bool, until time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.deciding, l.until = deciding, until
	close(l.news)
	l.news = make(chan struct{})
}

// TestNoLeaderIsAnsweredAtOnce: a request that no leader decides is
// denied, saying so, once it has waited NoLeaderWait (on the executor's
// clock), not held until the admission's deadline, and is not written
// while no leader decides; a leader that stops renewing counts as gone when
// its window ends; a leader that holds the Lease but has not been seen
// deciding anything for minSilence counts as not deciding; a leader that
// appears within NoLeaderWait and decides is waited for. What was written is put back as
// for any refusal. No controller decides here: the fake API server keeps
// every request pending, and the decisions seen on other ledgers are fed
// to the Waiter as its informer would.
func TestNoLeaderIsAnsweredAtOnce(t *testing.T) {
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	const ns, disk, image = "longhorn-system", "uuid-0", "default-image-x7k2p"
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	// decideElsewhere is the leader's decision on another ledger, as the
	// Waiter's informer delivers it.
	decideElsewhere := func(w *Waiter) {
		old := &dsv1.DiskSchedule{ObjectMeta: metav1.ObjectMeta{Name: "uuid-1", Namespace: ns, Generation: 2},
			Status: dsv1.DiskScheduleStatus{ObservedGeneration: 1}}
		cur := old.DeepCopy()
		cur.Status.ObservedGeneration = 2
		w.Handler().OnUpdate(old, cur)
	}
	for _, tc := range []struct {
		name string
		// leader at the start, and what happens to it, and on the other
		// ledgers, once the request waits (nil: nothing).
		leader func() *fakeLeader
		then   func(*fakeLeader, *clocktesting.FakeClock, *Waiter)
		// step is how far the clock is stepped once the request waits.
		step time.Duration
		want string
		// words are in the denial's message.
		words string
		// written says whether the request reached the ledger.
		written bool
	}{
		{name: "no leader: denied after NoLeaderWait, nothing written",
			leader: func() *fakeLeader { return newFakeLeader(false, time.Time{}) },
			step:   NoLeaderWait, want: ResultNoLeader, words: "holder stopped renewing it"},
		{name: "a leader that stops renewing: denied when its window ends",
			leader: func() *fakeLeader { return newFakeLeader(true, start.Add(1500*time.Millisecond)) },
			then:   func(_ *fakeLeader, _ *clocktesting.FakeClock, w *Waiter) { decideElsewhere(w) },
			step:   1500 * time.Millisecond, want: ResultNoLeader, words: "holder stopped renewing it", written: true},
		{name: "a holder found gone when asked: denied after NoLeaderWait, not its window or minSilence",
			leader: func() *fakeLeader {
				l := newFakeLeader(true, start.Add(time.Hour))
				l.goneWhenAsked = true
				return l
			},
			step: NoLeaderWait, want: ResultNoLeader, words: "is gone: connection refused", written: true},
		{name: "a leader that decides nothing: denied after minSilence",
			leader: func() *fakeLeader { return newFakeLeader(true, start.Add(time.Hour)) },
			step:   minSilence, want: ResultNoLeader, words: "no decision on any ledger for the last 2s of the 2s this write waited", written: true},
		{name: "a leader that stops deciding: denied minSilence after its last decision",
			leader: func() *fakeLeader { return newFakeLeader(true, start.Add(time.Hour)) },
			then: func(_ *fakeLeader, clk *clocktesting.FakeClock, w *Waiter) {
				clk.Step(300 * time.Millisecond)
				decideElsewhere(w)
			},
			step: minSilence, want: ResultNoLeader, words: "no decision on any ledger for the last 2s of the 2.3s this write waited", written: true},
		{name: "a leader appears within NoLeaderWait and decides: waited for until the deadline",
			leader: func() *fakeLeader { return newFakeLeader(false, time.Time{}) },
			then: func(l *fakeLeader, clk *clocktesting.FakeClock, w *Waiter) {
				l.set(true, clk.Now().Add(time.Hour))
				clk.Step(300 * time.Millisecond)
				decideElsewhere(w)
			},
			step: NoLeaderWait - 100*time.Millisecond, want: ResultUndecided, written: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := &dsv1.DiskSchedule{ObjectMeta: metav1.ObjectMeta{Name: disk, Namespace: ns},
				Spec: dsv1.DiskScheduleSpec{Name: "disk-1", NodeID: "node-1"}}
			c := fake.NewClientBuilder().WithScheme(s).WithObjects(ds).WithStatusSubresource(ds).Build()
			clk := clocktesting.NewFakeClock(start)
			l := tc.leader()
			l.clk = clk
			w := NewWaiter(clk)
			e := NewExecutor(c, c, w, l, clk, nil, logr.Discard(), ns)
			plan := Plan{Requests: []Request{{Disk: disk, Kind: ledger.BackingImage, Name: image, Size: gi, Words: said()}}, Admitted: "admitted"}
			// The admission's deadline, on the wall clock, is far beyond
			// the steps of the executor's clock.
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			answered := make(chan Answer, 1)
			go func() { answered <- e.Execute(ctx, plan, false) }()
			waiting := func() {
				t.Helper()
				testenv.Eventually(t, ctx, time.Second, "the request waits on the executor's clock", func(context.Context) (bool, string, error) {
					return clk.HasWaiters(), "no waiter", nil
				}, testenv.Every(time.Millisecond))
			}
			waiting()
			if tc.then != nil {
				tc.then(l, clk, w)
				waiting()
			}
			clk.Step(tc.step)
			var got Answer
			select {
			case got = <-answered:
			case <-time.After(5 * time.Second):
				t.Fatal("no answer")
			}
			if got.Result != tc.want || got.Allowed {
				t.Fatalf("Execute = %+v, want %s", got, tc.want)
			}
			if tc.want == ResultNoLeader {
				if ctx.Err() != nil {
					t.Errorf("answered only at the admission's deadline: %+v", got)
				}
				if !strings.Contains(got.Message, "no leader is deciding") || !strings.Contains(got.Message, tc.words) {
					t.Errorf("the denial does not say no leader is deciding, and %q: %q", tc.words, got.Message)
				}
				if resp := got.Response(); resp.Allowed || resp.Result.Code != 403 {
					t.Errorf("the response is not a denial: %+v", resp.Result)
				}
			}
			stored := &dsv1.DiskSchedule{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(ds), stored); err != nil {
				t.Fatal(err)
			}
			if _, left := stored.Spec.BackingImages[image]; left {
				t.Errorf("the request was not put back: %v", stored.Spec.BackingImages)
			}
			// The fake API server starts every object at resourceVersion 999.
			if written := stored.ResourceVersion != "999"; written != tc.written {
				t.Errorf("the request was written: %v, want %v (resourceVersion %s)", written, tc.written, stored.ResourceVersion)
			}
		})
	}
}

// TestWaiterSeesDecisionsOnly: the Waiter notes a decision when the
// informer delivers a ledger whose status the DiskSchedule controller
// rewrote (a new observedGeneration or a new total), and not when only
// the spec changed: the requesters' own writes, which go on while the
// leader is gone, are no sign that a leader decides.
func TestWaiterSeesDecisionsOnly(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	w := NewWaiter(clk)
	old := &dsv1.DiskSchedule{ObjectMeta: metav1.ObjectMeta{Name: "uuid-0", Namespace: "ns", Generation: 3},
		Status: dsv1.DiskScheduleStatus{ObservedGeneration: 3, StorageScheduled: gi}}
	requested := old.DeepCopy()
	requested.Generation = 4
	requested.Spec.Replicas = map[string]dsv1.RequestedBytes{"pvc-a-r-1": dsv1.RequestedBytes(gi)}
	w.Handler().OnUpdate(old, requested)
	if got := w.LastDecision(); !got.IsZero() {
		t.Fatalf("a request written counts as a decision seen at %s", got)
	}
	clk.Step(time.Second)
	decided := requested.DeepCopy()
	decided.Status.ObservedGeneration = 4
	w.Handler().OnUpdate(requested, decided)
	if got := w.LastDecision(); !got.Equal(clk.Now()) {
		t.Fatalf("a decision of generation 4 seen at %s, want %s", got, clk.Now())
	}
	clk.Step(time.Second)
	released := decided.DeepCopy()
	released.Status.StorageScheduled = 0
	w.Handler().OnUpdate(decided, released)
	if got := w.LastDecision(); !got.Equal(clk.Now()) {
		t.Fatalf("a release (a new total, same generation) seen at %s, want %s", got, clk.Now())
	}
}
