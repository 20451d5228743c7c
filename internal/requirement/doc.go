// Package requirement carries out what a write of Longhorn's asks of the
// ledgers (DESIGN §4): the one executor of the gate's request → wait →
// put-back protocol, for the plans of internal/controller/replica, volume
// and backingimage.
//
// A Plan is pure: the kind's package computes it from the old and new
// Longhorn object and the ledgers its cache holds. It answers at once (the
// write takes no new space), or lists Requests, each an entry of a disk's
// DiskSchedule spec at a size, and carries the words of every outcome as
// data: the plan's admissions, and each request's Words, which the Executor
// completes with what only the outcome knows, the refusing ledger's place
// and numbers (Refusal). The Executor then, for each request in order:
//
//   - admits it at once when its ledger grants it at that size; with
//     Confirm (replicas), only once the API server still holds the grant,
//     as the cache may lag behind a release of the mirror's (rule 10), and
//     with the version the placement is admitted at recorded under the lock
//     (spec.replicaVersions);
//   - withdraws a request the ledger rejected at that very size, so it is
//     decided afresh;
//   - writes it from the version read (the API server's when the cache
//     lagged): a merge patch of its own key (ledgerclient.Merge), or with
//     the optimistic lock when it takes over a reservation (rule 5);
//
// then waits, woken by the DiskSchedule informer (Waiter), until the
// DiskSchedule controller decided each written generation. All granted:
// admitted. One refused: every request written is put back to what it was
// (ledgerclient.PutBack retries every conflict, so a busy ledger does not
// make a put-back fail) and the write is denied with the ledger's numbers;
// a new request the ledger rejected holds nothing and is left as decided,
// for the next ask of it to withdraw and the mirror to release. Not
// decided in time: put back likewise, unless the plan keeps it so
// Longhorn's retry finds it granted at once (a replica's). While no
// leader decides (Leader, internal/leader), nothing is written: a request
// waits NoLeaderWait for one, then is denied with ErrNoLeader's words; one
// written before the leader went is answered likewise and put back or
// kept as any undecided request. The Lease says a leader is gone only a
// renewal window after its last renewal, so once a request has waited
// NoLeaderWait without a decision on any ledger the holder is asked
// itself (Leader.Suspect, internal/leader's probe of its gate): a holder
// whose address refuses the call, or answers that it is not the holder,
// no longer counts as deciding, and the write is answered at once. A
// holder that cannot be asked (no address, a timeout) also counts as not
// deciding once a waiting request has seen no decision on any ledger
// (Waiter.LastDecision) for 2 s (minSilence), or for three times the slowest
// decision of the last 30 s when that is longer (at most 6 s): a live
// leader decides within milliseconds, and on some ledger all the time
// while it has a backlog, but a decision on a ledger of thousands of
// entries on a loaded control plane can take a second.
// A dry run writes nothing and gets the plan's DryRun answer.
package requirement
