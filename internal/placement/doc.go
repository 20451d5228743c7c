// Package placement chooses disks for new replicas of one volume, following
// Longhorn's two-stage scheduling policy (node and zone stage, then disk
// stage) as longhorn-manager v1.12's replica scheduler applies it. It is a
// pure function of its input: it has no client, reads no clock and keeps no
// state between calls, so the volume controller and the scheduler extender
// can share it and it is tested with plain table tests.
//
// Eligibility is the one eligibility rule: which disks may take the next
// replica, and why every other node and disk may not (NodeFailures and
// DiskFailuresForVolume are its per-node and per-disk parts). Place chooses
// among the same candidates, one replica at a time.
//
// # Held against Longhorn
//
// A differential test (differential_test.go) builds ten thousand seeded
// random cluster states as longhorn-manager writes them, runs Longhorn
// v1.12.0's own ReplicaScheduler.FindDiskCandidates on each over Longhorn's
// own datastore (on its fake clientsets), and compares every verdict with
// Eligibility's; FuzzPlacementAgainstLonghorn draws the states from fuzz
// input. Every verdict agrees, or the difference is one the test lists as
// deliberate, with its reason; docs/placement-differences.md lists them
// for operators.
//
// # Space
//
// A disk takes a replica of size S with actual size A when both Longhorn
// conditions hold:
//
//	actual space:     storageAvailable - A > storageMaximum * minimal-available% / 100   (strict)
//	scheduling space: S + storageScheduled <= storageLimit
//
// storageLimit and storageScheduled come from the disk's ledger
// (DiskSchedule status). The caller adds the bytes of requests still pending
// on the ledger to storageScheduled, so undecided growth is never handed out
// twice. Replicas placed earlier in the same call are counted by Place itself.
// The percentages are applied exactly in integers (ledger.Limit,
// ledger.MinimalAvailable); Longhorn applies them in float64, which can differ by
// a few bytes on disks of tens of TiB (a deliberate difference).
//
// # Policy choices where Longhorn's documentation is silent or ambiguous
//
//   - Nodes without a zone label all share the zone "", as Longhorn does:
//     with zone anti-affinity hard, a second replica never goes to another
//     unlabelled node.
//   - Zone anti-affinity hard implies node anti-affinity hard: only a new
//     node in a new zone is ever chosen, except that a node whose replicas,
//     and its zone's, are all being evicted may take their replacement
//     (Longhorn #3076; with node anti-affinity hard and zone soft, such a
//     node comes after the new nodes).
//   - An existing replica counts for node and zone anti-affinity only on a
//     node that may take replicas (Ready, Schedulable, allowScheduling), as
//     in Longhorn's scheduler; a replica on another node, or one being
//     deleted, or a failed one once the volume is replenishing, counts for
//     disk anti-affinity only (FromLonghornReplica).
//   - The node selector applies to every node, also to nodes that already
//     hold a replica (Longhorn v1.12 skips it there when node and zone
//     anti-affinity are both soft: a deliberate difference).
//   - A data engine v1 volume takes filesystem disks, a v2 volume block
//     disks; a v1 volume of 16Ti or more does not fit an ext2/3/4 disk.
//   - The actual size A of a new replica is given by the caller (Longhorn uses
//     the volume's status.actualSize, 0 for a new volume; the documentation
//     treats it as 0 when evaluating disks).
//   - Data locality best-effort prefers the attached node among the disks of
//     the winning anti-affinity stage, as Longhorn's scheduler does: it never
//     overrides anti-affinity.
//   - A pinned node (strict-local or a replica's hardNodeAffinity) narrows the
//     candidates to that node; the anti-affinity stages still apply, with
//     only the replicas on that node counted, as in Longhorn.
//   - Among the candidates of the winning stage, the node with the most
//     usable ledger space (limit - scheduled, summed over its candidate
//     disks) wins, then its disk with the most usable space; ties go to the
//     smaller name. This is Longhorn's balancing with a deterministic
//     tie-break.
package placement
