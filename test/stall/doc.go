// Package stall measures how long the admission gate's denials stall
// Longhorn volumes, with Longhorn's own code placing: a sandbox
// (kube-apiserver, the manager with the gate registered) running
// longhorn-manager v1.12.0's own controllers, one longhorn-manager per node
// (TestStalls: a race for the disks, a full cluster, a reservation on the
// disk Longhorn picks). longhorn-manager writes nothing else of a volume in
// a sync whose replica write was refused, so a volume is stalled from its
// first refused replica write until its replica is persisted on a disk, or
// until Longhorn's own scheduler reports no candidate in the volume's
// Scheduled condition (then Longhorn, not the gate, says no); when the
// volume already said Scheduled=False before its last refusal, the sync
// after that refusal had nothing new to write, and the stall is taken to
// end at the refusal. The sandbox's Options.OnRefusedWrite gives each
// replica write the gate denied, with its time; watches of Replicas and
// Volumes give the ends. Each case bounds every stall by a documented
// figure (docs/accounting-differences.md, "Stalls measured"); a watch of
// every DiskSchedule checks the ledger's invariant in every version, a
// watch of every Replica checks that no disk ever holds more than its
// limit, and at the end every ledger settles on what is persisted.
//
// The cases of longhorn_test.go, backingimage_test.go,
// pendingexpansion_test.go, migration_test.go and rwx_test.go run on the
// same controllers over the simulated data plane, with pods: a disk's
// eviction (TestDiskEvictionStall), a claim's expansion
// (TestExpansionStall), a replica rebuilt after its node goes down
// (TestNodeDownRebuildStall: the sandbox's StopNode stops the node's
// kubelet, instance manager and longhorn-manager, and the test sets
// Longhorn's replica-replenishment-wait-interval to 90 s through its
// Setting, as an operator would, from its default of 600 s), a
// backing-image volume's first start on a disk without the image's copy
// (TestBackingImageFirstStartStall: to the pod running with the copy, which
// the gate asked of the ledger at the image's realSize when Longhorn's
// replica controller added the disk to the image, ready on the replica's
// disk; the copy granted where it fits beside the replica, and adopted over
// the limit, Overcommitted=True, where the replica filled the disk, as
// Longhorn's own node controller counts it), an expansion beside a new
// volume that only the expanded disk matches (TestPendingExpansionStall:
// the new volume created with the claim's expansion, at the volume's
// growth, or before it; the new volume's stall from its first refused
// replica write to Longhorn's own Scheduled=False, or the expansion refused
// when the new replica landed first), a live migration
// (TestLiveMigrationStall, migration_test.go: a migratable volume's second
// attachment on another node starting it and the first's removal confirming
// it, with the gate and the mirror meeting the migration replicas Longhorn
// creates), and an RWX claim's pod (TestRWXStall, rwx_test.go: Longhorn's
// share manager controller attaching the volume on its share manager's
// node, the pod running once the share runs with its endpoint; the extender
// reserving nothing for the volume). Each stall runs from the request, the
// node's going down or the pod's creation to what Longhorn reports done,
// and is bounded by Longhorn's and Kubernetes' own periods (same document,
// "Stalls on Longhorn's own controllers"); the same watch checks every
// ledger's invariant, and every ledger settles on what Longhorn persisted,
// the ledgers of a down node not Ready.
package stall
