package gatebench

import (
	"strings"
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	var latencies []time.Duration
	for i := 100; i >= 1; i-- {
		latencies = append(latencies, time.Duration(i)*time.Millisecond)
	}
	f := summarize(latencies, 2*time.Second)
	if f.ops != 100 || f.p50 != 50*time.Millisecond || f.p99 != 99*time.Millisecond || f.mean != 50500*time.Microsecond {
		t.Errorf("summarize() = %+v, want 100 ops, p50 50ms, p99 99ms, mean 50.5ms", f)
	}
	if f.rate() != 50 {
		t.Errorf("rate() = %v, want 50 writes/s", f.rate())
	}
	if got := summarize(nil, 0); got.p50 != 0 || got.mean != 0 {
		t.Errorf("summarize(nil) = %+v, want zeros", got)
	}
}

func TestTable(t *testing.T) {
	r := result{
		disks:    64,
		gate:     figures{ops: 300, elapsed: 10 * time.Second, p50: 200 * time.Millisecond, p99: 600 * time.Millisecond, mean: 220 * time.Millisecond, refused: 2},
		baseline: figures{ops: 300, elapsed: 3 * time.Second, p50: 60 * time.Millisecond, p99: 200 * time.Millisecond, mean: 70 * time.Millisecond},
		split:    split{request: 80 * time.Millisecond, decision: 60 * time.Millisecond, answer: 40 * time.Millisecond},
		stats: gateStats{answers: 302, admitted: 300, refused: map[string]float64{"error": 2}, seconds: 45.3, conflicts: 3,
			batches: 100, batched: 250, batchWait: 1.5},
		adoption: [2]time.Duration{time.Second, 3 * time.Second},
	}
	r.statusWrites = 300
	got := table([]result{r}, 8)
	for _, want := range []string{
		"| 64 | 8 | 300 | 30 | 200.0 / 600.0 | 2 | 100 | 60.0 / 200.0 | 0.30 | 3.33 | 3.00 |\n",
		"| 64 | 80.0 | 60.0 | 40.0 | 220.0 / 70.0 | 150.0 | 2.50 (15.0) | 1.00 | 0.01 | 1000 / 3000 |\n",
		"(disks=64: the gate refused 2 error.)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
}
