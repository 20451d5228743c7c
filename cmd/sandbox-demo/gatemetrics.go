package main

import (
	"fmt"
	"io"
	"slices"

	dto "github.com/prometheus/client_model/go"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// gateDecisions is the admission gate's answers counter, which the
// sandboxes' in-process managers register with controller-runtime's
// registry.
const gateDecisions = "longhorn_diskschedule_gate_decisions_total"

// gateRoundTrips is the counter of the admission gate's answers that took
// a ledger round trip.
const gateRoundTrips = "longhorn_diskschedule_gate_ledger_round_trips_total"

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

// gateKinds are the kinds of Longhorn object the gate answers for, in the
// order the report lists them.
var gateKinds = []string{"replica", "volume", "backingimage"}

// gateCall counts what the gate received for one kind of Longhorn write.
type gateCall struct {
	// calls is every answer, whatever its result.
	calls int
	// roundTrips is the answers that took a ledger round trip.
	roundTrips int
}

// gateCalls returns, by kind, how many writes the admission gate of this
// process has answered since it started and how many of them took a
// ledger round trip. Every sandbox of the demo runs in this process, so
// the counts add up over the whole run.
func gateCalls() (map[string]gateCall, error) {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return nil, fmt.Errorf("reading the gate's metrics: %w", err)
	}
	out := map[string]gateCall{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			kind := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" {
					kind = l.GetValue()
				}
			}
			c := out[kind]
			switch f.GetName() {
			case gateDecisions:
				c.calls += int(m.GetCounter().GetValue())
			case gateRoundTrips:
				c.roundTrips += int(m.GetCounter().GetValue())
			default:
				continue
			}
			out[kind] = c
		}
	}
	return out, nil
}

// writeGateCalls writes the gate's calls by kind as a table.
func writeGateCalls(w io.Writer, calls map[string]gateCall) {
	kinds := slices.Clone(gateKinds)
	for k := range calls {
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	fmt.Fprintf(w, "  %-13s %8s %22s %18s\n", "kind", "calls", "ledger round trips", "answered at once")
	var total gateCall
	for _, k := range kinds {
		c := calls[k]
		total.calls += c.calls
		total.roundTrips += c.roundTrips
		fmt.Fprintf(w, "  %-13s %8d %22d %18d\n", k, c.calls, c.roundTrips, c.calls-c.roundTrips)
	}
	fmt.Fprintf(w, "  %-13s %8d %22d %18d\n", "all", total.calls, total.roundTrips, total.calls-total.roundTrips)
}
