package benchutil

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	ten := []time.Duration{ms(1), ms(2), ms(3), ms(4), ms(5), ms(6), ms(7), ms(8), ms(9), ms(10)}
	for _, tc := range []struct {
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{nil, 0.5, 0},
		{ten, 0.50, ms(5)},
		{ten, 0.99, ms(10)},
		{ten, 0.10, ms(1)},
		{ten, 1, ms(10)},
		{ten[:1], 0.99, ms(1)},
		{ten[:1], 0.01, ms(1)},
	} {
		if got := Percentile(tc.sorted, tc.p); got != tc.want {
			t.Errorf("Percentile(%d values, %v) = %s, want %s", len(tc.sorted), tc.p, got, tc.want)
		}
	}
}

func TestMillisAndRatio(t *testing.T) {
	if got := Millis(1500 * time.Microsecond); got != 1.5 {
		t.Errorf("Millis(1.5ms) = %v", got)
	}
	if got := Ratio(3*time.Second, 2*time.Second); got != 1.5 {
		t.Errorf("Ratio(3s, 2s) = %v", got)
	}
	if got := Ratio(time.Second, 0); got != 0 {
		t.Errorf("Ratio(1s, 0) = %v, want 0", got)
	}
}
