// Package ledger holds the rules of the DiskSchedule ledger as pure
// functions: the admission decision that turns a DiskSchedule's spec and
// previous status into its next status, the storage limit of a disk,
// Longhorn's actual-space rule (ActualSpace), what Longhorn has persisted
// on each disk as the ledger counts it (PersistedByDisk), which replicas
// share one data directory and are counted once (SharedData), the kinds of
// entry a ledger holds (Kind), and the read-side helpers
// requesters use to see how much space a disk can still grant. It has no
// client, so every rule is table-tested in microseconds.
package ledger
