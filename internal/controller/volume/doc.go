// Package volume is the requirement writer of Longhorn's Volumes (DESIGN
// §4): the gate's verdict on a Volume write and its webhook handler.
//
//   - Plan: a volume whose spec.size grows raises the request of every
//     replica with a disk (one per data directory) to the new size; it is
//     admitted only when all are granted, otherwise what was granted is put
//     back and the write denied with the numbers: in the words Longhorn's
//     CSI driver maps to OutOfRange (requirement.ExpansionRefusal) only
//     when the disk cannot hold the growth whatever else ends (its limit
//     less what Longhorn persisted there, ledger.CanEverHold), otherwise in
//     words CSI answers Internal and the external resizer retries
//     (requirement.RetriableRefusal): each request carries its growth and
//     what Longhorn persisted on its disk in its words. TakesSpace is the
//     Go side of the webhook's matchCondition.
//   - Handler reads the volume's replicas and their ledgers from the
//     cache; internal/requirement carries the plan out.
//
// A volume has no part of the mirror of its own: a replica's volumeSize
// growth the gate did not see is mirrored as the replica's
// (ledger.PersistedByDisk).
package volume
