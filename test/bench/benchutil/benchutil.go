// Package benchutil holds what the benchmarks under test/bench share:
// their figures' arithmetic (Millis, Percentile, Ratio), the machine's load
// while they ran (LoadAverage), and the Tracker of the DiskSchedule versions
// an informer delivers.
package benchutil

import (
	"math"
	"os"
	"strings"
	"time"
)

// Millis returns d in milliseconds, for figures.
func Millis(d time.Duration) float64 {
	return float64(d) / float64(time.Millisecond)
}

// Percentile returns the nearest-rank p-th percentile (0 < p ≤ 1) of
// sorted, a sorted slice, or 0 when it is empty.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// PercentileMillis returns the nearest-rank p-th percentile of sorted
// (Percentile) in milliseconds.
func PercentileMillis(sorted []time.Duration, p float64) float64 {
	return Millis(Percentile(sorted, p))
}

// Ratio returns a / b, or 0 when b is 0.
func Ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// LoadAverage returns the machine's 1, 5 and 15 minute load averages, which
// say whether anything else competed for its cores during a run, or
// "unknown".
func LoadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	fields := strings.Fields(string(data))
	return strings.Join(fields[:min(3, len(fields))], " ")
}
