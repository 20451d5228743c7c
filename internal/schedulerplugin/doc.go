// Package schedulerplugin is the diskschedule plugin of kube-scheduler's
// scheduling framework, compiled into the second scheduler
// (cmd/diskschedule-scheduler, DESIGN §6.1). It decides what the extender
// decides, with the extender's own code (internal/extender), at the
// framework's extension points instead of over HTTP:
//
//   - PreFilter evaluates every node at once (Extender.Evaluate: the
//     filter's pure evaluator on a snapshot of the ledgers less what the
//     pods held in flight claim), keeps the verdicts in the cycle state,
//     and narrows a restarted pod to the node that holds a replica of each
//     of its volumes; a pod without Longhorn volumes that need space on
//     its node is skipped.
//   - Filter answers each node from those verdicts, with the reason in
//     numbers.
//   - PreScore and Score score the nodes as the extender's prioritize does
//     (Cycle.Scores), on kube-scheduler's 0–100 scale.
//   - Reserve holds the pod's space on the chosen node in memory
//     (Extender.Hold), so the next pods' cycles count it; Unreserve gives
//     it back (Extender.Release).
//   - PreBind writes the reservations into the node's ledgers as the
//     extender's /bind does (Extender.Reserve) and waits for the ledger's
//     decision (Extender.AwaitDecisions) before the pod is bound; a
//     refused reservation returns Unschedulable with the ledger's numbers,
//     and the pod goes back to the queue.
//
// The plugin reads the cluster through a cache of its own, restricted to
// what the extender reads (Longhorn's namespace, pods and claims in every
// namespace, the extender's ConfigMap by name), and writes only
// reservations in DiskSchedule specs.
package schedulerplugin
