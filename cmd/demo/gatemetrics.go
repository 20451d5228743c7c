package main

import (
	"fmt"

	dto "github.com/prometheus/client_model/go"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// gateDecisions is the admission gate's answers counter, which the
// sandboxes' in-process managers register with controller-runtime's
// registry.
const gateDecisions = "longhorn_diskschedule_gate_decisions_total"

// gateRefusals returns how many Replica writes the admission gate of this
// process has refused so far: every answer but admitted (denied for space,
// undecided in time, or failed). It is 0 while no gate has run.
func gateRefusals() (int, error) {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return 0, fmt.Errorf("reading the gate's metrics: %w", err)
	}
	for _, f := range families {
		if f.GetName() == gateDecisions {
			return refusals(f.GetMetric()), nil
		}
	}
	return 0, nil
}

// refusals sums the gate's answers to Replica writes that were not admitted.
func refusals(metrics []*dto.Metric) int {
	n := 0.0
	for _, m := range metrics {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["kind"] == "replica" && labels["result"] != "admitted" {
			n += m.GetCounter().GetValue()
		}
	}
	return int(n)
}
