package requirement

import (
	"testing"
	"time"
)

// TestPace: a leader counts as not deciding after minSilence of silence,
// after three times its slowest recent decision when that is longer (so a leader
// slowed by large ledgers is not taken for gone), never after more than
// maxSilence, and a slow decision stops counting once paceWindow passed.
func TestPace(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var p pace
	if got := p.silence(start); got != minSilence {
		t.Errorf("no decision seen: silence %s, want minSilence %s", got, minSilence)
	}
	p.observe(start, 100*time.Millisecond)
	if got := p.silence(start); got != minSilence {
		t.Errorf("fast decisions: silence %s, want %s", got, minSilence)
	}
	p.observe(start.Add(time.Second), 1500*time.Millisecond)
	p.observe(start.Add(2*time.Second), 200*time.Millisecond)
	if got := p.silence(start.Add(3 * time.Second)); got != 4500*time.Millisecond {
		t.Errorf("a 1.5 s decision 2 s ago: silence %s, want 4.5s", got)
	}
	p.observe(start.Add(4*time.Second), 10*time.Second)
	if got := p.silence(start.Add(5 * time.Second)); got != maxSilence {
		t.Errorf("a 10 s decision: silence %s, want maxSilence %s", got, maxSilence)
	}
	if got := p.silence(start.Add(4*time.Second + paceWindow + time.Millisecond)); got != minSilence {
		t.Errorf("the slow decision out of the window: silence %s, want %s", got, minSilence)
	}
}
