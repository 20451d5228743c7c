// Package replica is the requirement writer of Longhorn's Replicas
// (DESIGN §4): the gate's verdict on a Replica write, its webhook handler,
// and the replicas' part of the mirror.
//
//   - Plan (§4, rules 5 and 10): a replica whose spec.diskID becomes a
//     disk (from none or another), or whose volumeSize grows there, asks
//     its own volumeSize on that disk's ledger, as Longhorn's scheduler
//     checks it, naming its volume's reservation there for the handoff;
//     already granted at that size, it is admitted at once (idempotent),
//     once the API server confirms the grant. A replica CREATE that shares
//     disk and data directory with a replica of its volume (v1 live
//     migration, live engine upgrade) takes no new space. TakesSpace is
//     the Go side of the webhook's matchCondition.
//   - Handler reads Plan's inputs (the volume's replicas, the disk's
//     ledger) from the cache; internal/requirement carries the plan out.
//   - Lost (rule 10): the entries no write will back (a clone's beside
//     the replica counted for its data directory, persisted elsewhere, or
//     their admitted write lost), for internal/controller/mirror; what is
//     persisted on a disk is the ledger's rule (ledger.PersistedByDisk).
package replica
