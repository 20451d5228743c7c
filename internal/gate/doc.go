// Package gate is the admission gate (DESIGN §4): a validating webhook on
// Longhorn's Replicas, Volumes and BackingImages that makes every write of
// Longhorn's that takes disk space ask the disk's ledger first.
//
// Longhorn v1.12 places replicas from each volume controller's own cache,
// with no lock. The gate turns each such placement into a request in the
// disk's DiskSchedule spec, waits for the DiskSchedule controller's decision
// from the informer, and admits the write only when the ledger granted it;
// otherwise it denies the write with the ledger's own message in numbers.
//
// A denial costs Longhorn more than the write: longhorn-manager v1.12 writes
// nothing else of a volume (engines, status) in a sync where one of its
// replica Updates failed, and retries on the same view of the disks, so the
// volume waits until that view changes. The gate therefore asks what
// Longhorn's own accounting counts, so that a denial is a lost race that
// Longhorn's next view of the disk resolves (docs/accounting-differences.md
// lists where the two may still differ, and for how long): a replica its own
// volumeSize (a backing image's copy is asked for on its own, at the
// image's status.realSize, when Longhorn adds the disk to the image), a
// volume's growth the new size of one replica per data directory, and a
// replica that Longhorn creates into the disk and data directory of
// another replica of its volume (v1 live migration, live engine upgrade)
// nothing. A volume growth refused reaches Longhorn's CSI driver as
// OutOfRange (expansionRefusal). A placement's request records the
// Replica's resourceVersion its write is admitted at
// (spec.replicaVersions): what the gate granted for a write that lost is
// released by the mirror as soon as its cache shows the Replica moved past
// that version, or placed on another disk (rule 10). Withdrawals and
// put-backs retry every conflict (ledgerclient.PutBack), so a busy ledger
// does not make them fail.
//
// The handlers run on every manager replica, not only the leader; they read
// through the manager's cache and write DiskSchedule specs only: a request
// as a merge patch of its own keys, a handoff, a version moved and a
// put-back with an optimistic lock, since they depend on the latest
// version. They never write a Longhorn object.
package gate
