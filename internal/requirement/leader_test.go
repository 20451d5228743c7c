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
	"github.com/longhorn/diskschedule/internal/testenv"
)

// fakeLeader is a Leader the test sets: deciding until until on clk.
type fakeLeader struct {
	clk      *clocktesting.FakeClock
	mu       sync.Mutex
	deciding bool
	until    time.Time
	news     chan struct{}
}

func newFakeLeader(deciding bool, until time.Time) *fakeLeader {
	return &fakeLeader{deciding: deciding, until: until, news: make(chan struct{})}
}

func (l *fakeLeader) Deciding() (bool, time.Time, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deciding && l.clk.Now().Before(l.until), l.until, l.news
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
// clock), not held until the admission's deadline; a leader that stops
// renewing counts as gone when its window ends; a leader that appears
// within NoLeaderWait is waited for. What was written is put back as for
// any refusal. No controller decides here: the fake API server keeps every
// request pending.
func TestNoLeaderIsAnsweredAtOnce(t *testing.T) {
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	const ns, disk, image = "longhorn-system", "uuid-0", "default-image-x7k2p"
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		// leader at the start, and what happens to it once the request
		// waits (nil: nothing).
		leader func() *fakeLeader
		then   func(*fakeLeader, *clocktesting.FakeClock)
		// step is how far the clock is stepped once the request waits.
		step time.Duration
		want string
	}{
		{name: "no leader: denied after NoLeaderWait",
			leader: func() *fakeLeader { return newFakeLeader(false, time.Time{}) },
			step:   NoLeaderWait, want: ResultNoLeader},
		{name: "a leader that stops renewing: denied when its window ends",
			leader: func() *fakeLeader { return newFakeLeader(true, start.Add(1500*time.Millisecond)) },
			step:   1500 * time.Millisecond, want: ResultNoLeader},
		{name: "a leader appears within NoLeaderWait: waited for until the deadline",
			leader: func() *fakeLeader { return newFakeLeader(false, time.Time{}) },
			then: func(l *fakeLeader, clk *clocktesting.FakeClock) {
				l.set(true, clk.Now().Add(time.Hour))
			},
			step: NoLeaderWait, want: ResultUndecided},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := &dsv1.DiskSchedule{ObjectMeta: metav1.ObjectMeta{Name: disk, Namespace: ns},
				Spec: dsv1.DiskScheduleSpec{Name: "disk-1", NodeID: "node-1"}}
			c := fake.NewClientBuilder().WithScheme(s).WithObjects(ds).WithStatusSubresource(ds).Build()
			clk := clocktesting.NewFakeClock(start)
			l := tc.leader()
			l.clk = clk
			e := NewExecutor(c, c, NewWaiter(), l, clk, nil, logr.Discard(), ns)
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
				tc.then(l, clk)
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
				if !strings.Contains(got.Message, "no leader is deciding") {
					t.Errorf("the denial does not say no leader is deciding: %q", got.Message)
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
		})
	}
}
