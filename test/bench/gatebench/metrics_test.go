package gatebench

import (
	"fmt"

	dto "github.com/prometheus/client_model/go"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// gateStats is a snapshot of the admission gate's replica metrics, which
// the sandboxes' in-process managers register with controller-runtime's
// registry.
type gateStats struct {
	// answers counts the gate's answers to Replica writes, admitted the
	// admitted ones.
	answers, admitted float64
	// refused counts the other answers by result (denied, undecided,
	// error, malformed).
	refused map[string]float64
	// seconds is the time the gate spent on them (the latency histogram's sum).
	seconds float64
	// conflicts counts the gate's ledger writes that lost the optimistic lock.
	conflicts float64
	// batches counts the gate's batched ledger writes of requests, batched
	// the requests they carried, batchWait the seconds the first request of
	// each waited for the write ahead of it.
	batches, batched, batchWait float64
}

// readGateStats reads the gate's metrics from this process's registry.
func readGateStats() (gateStats, error) {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return gateStats{}, fmt.Errorf("gathering the gate's metrics: %w", err)
	}
	s := gateStats{refused: map[string]float64{}}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			switch f.GetName() {
			case "longhorn_diskschedule_gate_duration_seconds":
				if label(m, "kind") == "replica" {
					s.seconds += m.GetHistogram().GetSampleSum()
				}
			case "longhorn_diskschedule_gate_decisions_total":
				if label(m, "kind") == "replica" {
					s.answers += m.GetCounter().GetValue()
					if result := label(m, "result"); result == "admitted" {
						s.admitted += m.GetCounter().GetValue()
					} else {
						s.refused[result] += m.GetCounter().GetValue()
					}
				}
			case "longhorn_diskschedule_gate_ledger_conflicts_total":
				s.conflicts += m.GetCounter().GetValue()
			case "longhorn_diskschedule_gate_ledger_batch_size":
				s.batches += float64(m.GetHistogram().GetSampleCount())
				s.batched += m.GetHistogram().GetSampleSum()
			case "longhorn_diskschedule_gate_ledger_batch_wait_seconds":
				s.batchWait += m.GetHistogram().GetSampleSum()
			}
		}
	}
	return s, nil
}

// label returns the value of a metric's label, or "".
func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// since returns what happened between before and s.
func (s gateStats) since(before gateStats) gateStats {
	refused := map[string]float64{}
	for result, n := range s.refused {
		if d := n - before.refused[result]; d > 0 {
			refused[result] = d
		}
	}
	return gateStats{
		answers:   s.answers - before.answers,
		admitted:  s.admitted - before.admitted,
		refused:   refused,
		seconds:   s.seconds - before.seconds,
		conflicts: s.conflicts - before.conflicts,
		batches:   s.batches - before.batches,
		batched:   s.batched - before.batched,
		batchWait: s.batchWait - before.batchWait,
	}
}

// perBatch returns the mean requests per batched ledger write and the mean
// wait of each batch's first request in milliseconds.
func (s gateStats) perBatch() (float64, float64) {
	if s.batches == 0 {
		return 0, 0
	}
	return s.batched / s.batches, 1000 * s.batchWait / s.batches
}
