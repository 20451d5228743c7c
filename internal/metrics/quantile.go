package metrics

import (
	"fmt"
	"math"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
)

// HistogramQuantile returns the q-quantile (0 < q < 1) of the histogram
// name gathered from g, summed over its label values and interpolated
// linearly within its bucket as Prometheus's histogram_quantile does, and
// how many observations it holds. With no observation it returns NaN and 0.
func HistogramQuantile(g prometheus.Gatherer, name string, q float64) (float64, uint64, error) {
	if q <= 0 || q >= 1 {
		return 0, 0, fmt.Errorf("quantile %v is not between 0 and 1", q)
	}
	families, err := g.Gather()
	if err != nil {
		return 0, 0, fmt.Errorf("gathering the metrics: %w", err)
	}
	buckets := map[float64]uint64{}
	var bounds []float64
	var count uint64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			h := m.GetHistogram()
			if h == nil {
				return 0, 0, fmt.Errorf("%s is not a histogram", name)
			}
			count += h.GetSampleCount()
			for _, b := range h.GetBucket() {
				if _, ok := buckets[b.GetUpperBound()]; !ok {
					bounds = append(bounds, b.GetUpperBound())
				}
				buckets[b.GetUpperBound()] += b.GetCumulativeCount()
			}
		}
	}
	if count == 0 {
		return math.NaN(), 0, nil
	}
	rank := q * float64(count)
	lower, below := 0.0, uint64(0)
	sort.Float64s(bounds)
	for _, upper := range bounds {
		n := buckets[upper]
		if float64(n) >= rank {
			if n == below {
				return upper, count, nil
			}
			return lower + (upper-lower)*(rank-float64(below))/float64(n-below), count, nil
		}
		lower, below = upper, n
	}
	// Above the highest bound: Prometheus answers the highest bound.
	return lower, count, nil
}
