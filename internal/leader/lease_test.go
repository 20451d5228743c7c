package leader

import (
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

const name = "longhorn-diskschedule-manager"

// lease is the Lease as its holder writes it at renewal renewed.
func lease(holder string, renewed time.Time, duration int32) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "longhorn-system"},
		Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To(duration)}}
	if holder != "" {
		l.Spec.HolderIdentity = ptr.To(holder)
		l.Spec.RenewTime = &metav1.MicroTime{Time: renewed}
	}
	return l
}

// TestDeciding walks a Lease through its life on a fake clock: the rule
// is the holder and when this replica saw its last renewal, never the
// holder's own timestamps.
func TestDeciding(t *testing.T) {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	// The holder's clock runs an hour behind: its timestamps do not count.
	skewed := start.Add(-time.Hour)
	for _, tc := range []struct {
		name   string
		renew  time.Duration
		events []*coordinationv1.Lease // observed in order at start (nil: deleted)
		step   time.Duration
		want   bool
		// until is how long after start a deciding leader counts as deciding.
		until time.Duration
	}{
		{name: "no Lease seen", want: false},
		{name: "a holder just renewed", renew: time.Second, events: []*coordinationv1.Lease{lease("a", skewed, 15)},
			want: true, until: 1500 * time.Millisecond},
		{name: "within one and a half renewal intervals", renew: time.Second, events: []*coordinationv1.Lease{lease("a", skewed, 15)},
			step: 1499 * time.Millisecond, want: true, until: 1500 * time.Millisecond},
		{name: "no renewal for one and a half renewal intervals", renew: time.Second, events: []*coordinationv1.Lease{lease("a", skewed, 15)},
			step: 1500 * time.Millisecond, want: false},
		{name: "the default renewal interval", events: []*coordinationv1.Lease{lease("a", skewed, 15)},
			step: 2999 * time.Millisecond, want: true, until: 3 * time.Second},
		{name: "never more than the lease duration", renew: 10 * time.Second, events: []*coordinationv1.Lease{lease("a", skewed, 4)},
			step: 4 * time.Second, want: false},
		{name: "released", renew: time.Second, events: []*coordinationv1.Lease{lease("a", skewed, 15), lease("", time.Time{}, 15)},
			want: false},
		{name: "deleted", renew: time.Second, events: []*coordinationv1.Lease{lease("a", skewed, 15), nil},
			want: false},
		{name: "another Lease", renew: time.Second, events: []*coordinationv1.Lease{func() *coordinationv1.Lease {
			l := lease("a", skewed, 15)
			l.Name = "other"
			return l
		}()}, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(start)
			l := NewLease(name, tc.renew, clk, logr.Discard())
			for _, ev := range tc.events {
				if ev == nil {
					l.observeObject(lease("a", skewed, 15), true)
					continue
				}
				l.observeObject(ev, false)
			}
			clk.Step(tc.step)
			got, until, _ := l.Deciding()
			if got != tc.want {
				t.Errorf("Deciding() = %v, want %v", got, tc.want)
			}
			if got && !until.Equal(start.Add(tc.until)) {
				t.Errorf("deciding until %s after the renewal, want %s", until.Sub(start), tc.until)
			}
		})
	}
}

// TestARenewalSeenLaterCounts: the window runs from when this replica saw
// the last renewal, and every change of the Lease is news.
func TestARenewalSeenLaterCounts(t *testing.T) {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	l := NewLease(name, time.Second, clk, logr.Discard())
	l.observeObject(lease("a", start, 15), false)
	_, _, news := l.Deciding()
	clk.Step(time.Second)
	l.observeObject(lease("a", start.Add(time.Second), 15), false)
	select {
	case <-news:
	default:
		t.Fatal("a renewal was no news")
	}
	clk.Step(time.Second)
	if ok, _, _ := l.Deciding(); !ok {
		t.Error("a holder renewed a second ago does not count as deciding")
	}
	// The same version delivered again (a resync) is no renewal.
	_, _, news = l.Deciding()
	l.observeObject(lease("a", start.Add(time.Second), 15), false)
	select {
	case <-news:
		t.Error("a resync of the same Lease was news")
	default:
	}
	clk.Step(600 * time.Millisecond)
	if ok, _, _ := l.Deciding(); ok {
		t.Error("a holder last renewed 1.6 s ago, with a 1 s interval, counts as deciding")
	}
	l.observeObject(lease("b", start, 15), false)
	if ok, _, _ := l.Deciding(); !ok {
		t.Error("a new holder does not count as deciding")
	}
}
