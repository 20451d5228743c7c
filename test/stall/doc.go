// Package stall measures how long the admission gate's denials stall
// Longhorn volumes, with Longhorn's own code placing: a sandbox
// (kube-apiserver, the manager with the gate registered) running
// longhorn-manager v1.12.0's own controllers (TestStalls, the Longhorn
// cases of longhorn_test.go) or, for the cases whose Longhorn paths those
// do not run here yet (TestSimulatedStalls), the simulated Longhorn whose
// replica placement is Longhorn's own ReplicaScheduler from three
// simulated longhorn-manager pods. longhorn-manager
// writes nothing else of a volume in a sync whose replica write was
// refused, so a volume is stalled from its first refused replica write
// until its replica is persisted on a disk, or until Longhorn's own
// scheduler reports no candidate in the volume's Scheduled condition (then
// Longhorn, not the gate, says no); when the volume already said
// Scheduled=False before its last refusal, the sync after that refusal had
// nothing new to write, and the stall is taken to end at the refusal. The
// sandbox's Options.OnRefusedWrite gives each refused write with its time
// (on Longhorn's controllers, each write the gate denied); watches of Replicas and Volumes give the ends. Each case bounds every
// stall by a documented figure (docs/accounting-differences.md, "Stalls
// measured"); a watch of every DiskSchedule checks the ledger's invariant in every
// version, a watch of every Replica checks that no disk ever holds more
// than its limit, and at the end every ledger settles on what is
// persisted.
package stall
