// Package stall measures how long the admission gate's denials stall
// Longhorn volumes, with Longhorn's own scheduler placing: a sandbox
// (kube-apiserver, the manager with the gate registered, and the simulated
// Longhorn whose replica placement is Longhorn v1.12.0's own
// ReplicaScheduler from three longhorn-manager pods). longhorn-manager
// writes nothing else of a volume in a sync whose replica write was
// refused, so a volume is stalled from its first refused replica write
// until its replica is persisted on a disk, or until Longhorn's own
// scheduler reports no candidate in the volume's Scheduled condition (then
// Longhorn, not the gate, says no); when the volume already said
// Scheduled=False before its last refusal, the sync after that refusal had
// nothing new to write, and the stall is taken to end at the refusal. The
// sandbox's Options.OnRefusedWrite gives each refused write with its time;
// watches of Replicas and Volumes give the ends. Each case bounds every
// stall by a documented figure (docs/accounting-differences.md, "Stalls
// measured"); a watch of every DiskSchedule checks the ledger's invariant in every
// version, a watch of every Replica checks that no disk ever holds more
// than its limit, and at the end every ledger settles on what is
// persisted.
//
// TestDiskEvictionStall, TestExpansionStall and TestLiveMigrationStall run
// on longhorn-manager v1.12.0's own controllers and the simulated data
// plane (longhorn_test.go, migration_test.go): live migration runs on
// Longhorn's code, a migratable volume's second attachment on another node
// starting it and the first's removal confirming it, with the gate and the
// mirror meeting the migration replicas Longhorn creates.
package stall
