package extender

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// offer returns an entry for pod uid that the filter passed on the given
// nodes, each with volume packed onto disk "<node>-d" at size bytes.
func offer(uid string, volume string, size int64, nodes ...string) *inflight {
	e := &inflight{pod: types.NamespacedName{Namespace: "ns", Name: uid}, uid: types.UID(uid), offered: map[string]fit{}}
	for _, n := range nodes {
		e.offered[n] = fit{OK: true, Assignment: map[string]string{volume: n + "-d"}, Sizes: map[string]int64{volume: size}}
	}
	return e
}

// closed reports whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestOverlayCountsAPodOnEveryOfferedNodeUntilItsNodeIsKnown(t *testing.T) {
	o := newOverlay()
	a, b := offer("a", "vol-a", 100, "n1", "n2"), offer("b", "vol-b", 50, "n2", "n3")
	o.add(a)
	o.add(b)
	for disk, want := range map[string]int64{"n1-d": 100, "n2-d": 150, "n3-d": 50} {
		if got := o.demand(disk); got != want {
			t.Errorf("demand on %s = %d, want %d", disk, got, want)
		}
	}

	changed := o.changed
	if !o.narrow(a, "n2", knownByBinding, time.Now()) {
		t.Fatal("narrowing to an offered node failed")
	}
	if !closed(changed) {
		t.Error("narrowing must wake waiting filters")
	}
	for disk, want := range map[string]int64{"n1-d": 0, "n2-d": 150, "n3-d": 50} {
		if got := o.demand(disk); got != want {
			t.Errorf("after a narrowed to n2: demand on %s = %d, want %d", disk, got, want)
		}
	}

	changed = o.changed
	if dropped := o.settle(a, "vol-a"); !dropped {
		t.Error("settling a's only volume must drop it")
	}
	if !closed(changed) || o.get("a") != nil || o.demand("n2-d") != 50 || o.len() != 1 {
		t.Errorf("after a settled: entry %v, demand on n2-d %d, entries %d", o.get("a"), o.demand("n2-d"), o.len())
	}
	if o.settle(a, "vol-a") {
		t.Error("settling twice must change nothing")
	}

	o.drop("b")
	if o.len() != 0 || len(o.perDisk) != 0 {
		t.Errorf("after dropping b: %d entries, demand %v", o.len(), o.perDisk)
	}
}

func TestOverlayDropsAPodBoundToANodeItWasNotOffered(t *testing.T) {
	o := newOverlay()
	a := offer("a", "vol-a", 100, "n1")
	o.add(a)
	if o.narrow(a, "n9", knownByBinding, time.Now()) {
		t.Fatal("narrowing to a node the filter did not offer must fail")
	}
	if o.len() != 0 || o.demand("n1-d") != 0 {
		t.Errorf("the entry must be gone: %d entries, demand %v", o.len(), o.perDisk)
	}
}

func TestOverlayReplacesAnEntryOfTheSamePod(t *testing.T) {
	o := newOverlay()
	o.add(offer("a", "vol-a", 100, "n1"))
	o.add(offer("a", "vol-a", 100, "n2"))
	if o.len() != 1 || o.demand("n1-d") != 0 || o.demand("n2-d") != 100 {
		t.Errorf("a new cycle of the same pod must replace its entry: %d entries, demand %v", o.len(), o.perDisk)
	}
}
