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
//
// TestDiskEvictionStall, TestExpansionStall and
// TestBackingImageFirstStartStall run on longhorn-manager v1.12.0's own
// controllers and the simulated data plane instead (longhorn_test.go,
// backingimage_test.go): each stall runs from the request (the disk's
// eviction, the claim's update, the pod's creation) to what Longhorn
// reports done; for a backing-image volume's first start on a disk without
// the image's copy, to the pod running with the copy, which the gate asked
// of the ledger at the image's realSize when Longhorn's replica controller
// added the disk to the image, ready on the replica's disk.
package stall
