// Package diskschedule is the DiskSchedule controller, the only writer of
// DiskSchedule status. For each ledger it reads the spec, the disk's limit,
// schedulability and actual space from Longhorn's Node (ledger.DiskOf), the
// replicas and backing-image copies Longhorn has persisted on the disk
// (adopted, rule 7), the data each requested replica's volume holds
// (status.actualSize, for Longhorn's actual-space rule), where each
// reservation's pod is (bound to the disk's node, bound elsewhere, gone or
// not bound yet) and whether a replica of its volume is persisted on the
// node (rule 6: a bound pod's reservation is held with no expiry, and only
// reservations of unbound pods are requeued at their expiresAt), the
// over-provisioning and minimal-available Settings and the reservation
// timeout, asks the pure
// ledger.Decide for the next status and writes it with the resourceVersion
// it read, so a decision computed from a stale view fails with a conflict
// and is made again. One method writes every status (writeStatus): a
// status that breaks the ledger's invariant (ledger.Violation) is never
// written, but reported as a Warning Event on the DiskSchedule, the
// counter longhorn_diskschedule_invariant_violations_total and an error
// log. It never writes a spec, nor any Longhorn object.
package diskschedule
