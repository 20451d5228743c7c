package metrics

import (
	"math"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestHistogramQuantile(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := NewPodWebhook(reg).Latency
	if v, n, err := HistogramQuantile(reg, "longhorn_diskschedule_pod_webhook_duration_seconds", 0.99); err != nil || n != 0 || !math.IsNaN(v) {
		t.Errorf("no observation: %v, %d, %v; want NaN, 0", v, n, err)
	}
	for range 98 {
		h.Observe(0.0015) // bucket (0.001, 0.002]
	}
	h.Observe(0.02) // (0.01, 0.025]
	h.Observe(0.02)
	v, n, err := HistogramQuantile(reg, "longhorn_diskschedule_pod_webhook_duration_seconds", 0.99)
	if err != nil || n != 100 {
		t.Fatalf("%v, %d, %v", v, n, err)
	}
	// The 99th of 100 lies in (0.01, 0.025], the first of its two.
	if want := 0.01 + 0.015*0.5; math.Abs(v-want) > 1e-9 {
		t.Errorf("p99 = %v, want %v", v, want)
	}
	if v, _, _ := HistogramQuantile(reg, "longhorn_diskschedule_pod_webhook_duration_seconds", 0.5); v <= 0.001 || v > 0.002 {
		t.Errorf("p50 = %v, want within (0.001, 0.002]", v)
	}
	if _, _, err := HistogramQuantile(reg, "longhorn_diskschedule_pod_webhook_duration_seconds", 1); err == nil {
		t.Errorf("quantile 1: no error")
	}
}
