// Package gate is the admission gate (DESIGN §4): a validating webhook on
// Longhorn's Replicas, Volumes and BackingImages that makes every write of
// Longhorn's that takes disk space ask the disk's ledger first.
//
// Longhorn v1.12 places replicas from each volume controller's own cache,
// with no lock. The gate turns each such placement into a request in the
// disk's DiskSchedule spec, waits for the DiskSchedule controller's decision
// from the informer, and admits the write only when the ledger granted it;
// otherwise it denies the write with the ledger's own message in numbers, and
// Longhorn keeps the replica unscheduled and tries again. What the gate
// granted for a write that never landed is released by the mirror after its
// grace period (rule 10).
//
// The handlers run on every manager replica, not only the leader; they read
// through the manager's cache and write DiskSchedule specs only, with an
// optimistic lock. They never write a Longhorn object.
package gate
