// Package gate is the admission gate (DESIGN §4): the validating webhook
// diskschedule-gate on Longhorn's Replicas, Volumes and BackingImages that
// makes every write of Longhorn's that takes disk space ask the disk's
// ledger first.
//
// The gate is the webhook server's side: it registers one handler per
// kind, bounds each admission's time, records metrics, logs, and puts a
// Warning Event on the Longhorn object it denies; it keeps its TLS
// certificate (cert-controller) and gives the sandbox and the tests the
// webhook configuration config/webhook ships (LocalConfiguration). What a
// write asks is not decided here. DESIGN §4's rules live where the kind
// lives:
//
//   - internal/controller/replica: a replica whose spec.diskID becomes a
//     disk or whose volumeSize grows there asks its volumeSize; a clone
//     sharing a data directory asks nothing; a grant already there admits
//     at once.
//   - internal/controller/volume: a volume whose spec.size grows asks the
//     new size of every replica on a disk; a refusal reaches Longhorn's CSI
//     driver as OutOfRange when the disk cannot hold the growth whatever
//     else ends, and as a retriable error otherwise.
//   - internal/controller/backingimage: a disk added to
//     spec.diskFileSpecMap asks a copy at status.realSize.
//   - internal/requirement: the one executor of those plans, the request →
//     wait → put-back protocol, and the answers' words.
//
// The webhook configuration's matchConditions (CEL) send the gate only
// writes that may take space; matchconditions_test.go holds them against
// each kind's TakesSpace.
//
// A denial costs Longhorn more than the write: longhorn-manager v1.12
// writes nothing else of a volume (engines, status) in a sync where one of
// its replica Updates failed, and retries on the same view of the disks,
// so the volume waits until that view changes. The gate therefore asks
// what Longhorn's own accounting counts, so that a denial is a lost race
// that Longhorn's next view of the disk resolves
// (docs/accounting-differences.md lists where the two may still differ,
// and for how long).
//
// The handlers run on every manager replica, not only the leader; they read
// through the manager's cache and write DiskSchedule specs only. They never
// write a Longhorn object.
package gate
