// Package leader tells every manager replica whether a leader is deciding
// the ledgers (DESIGN §7): only the leader's DiskSchedule controller
// decides, while the gate is served by every replica, so a write the gate
// holds while no leader decides would be held for nothing until
// --gate-timeout. The gate asks Lease.Deciding instead, and answers at once.
//
// The source is the manager's leader-election Lease, read through the
// manager's cache, which follows that one Lease by name (a field selector,
// so RBAC can name it). The rule, in one place (deciding):
//
//   - a Lease with no holder (released by a leader that stopped, or never
//     taken) or no Lease at all: no leader decides;
//   - a holder counts as deciding while a renewal of the Lease (a new
//     spec.renewTime or a new holder) was seen within the renewal window
//     on this replica's own clock, never the holder's timestamps, so clock
//     skew between nodes does not matter.
//
// The renewal window is one and a half renewal intervals (the leader
// renews every RetryPeriod), and never more than the Lease's own
// leaseDurationSeconds: a leader that stops renewing is taken for gone
// long before its Lease expires, which is what a killed leader looks like.
// A late renewal of a live leader makes its replicas' gates wait a little
// (requirement.NoLeaderWait) for the renewal rather than deny.
//
// A leader killed just after a renewal would still count as deciding for
// the whole window, so a replica whose write has waited NoLeaderWait
// without a decision asks the holder itself (Lease.Suspect): the
// leader-election identity names the address the holder's gate serves on
// (Identity: "<pod>_<uuid>@<pod IP>:<gate port>"), and every gate answers
// ProbePath (Handler) over the gate's own TLS, saying whether it is that
// holder and sees its own renewals on time. A refused connection (nothing
// listens there: the process is gone) or an answer that it is not the
// holder makes the holder count as not deciding until its next renewal
// is seen; a timeout or any other failure says nothing, and the holder is
// judged by its renewals and, in internal/requirement, by its silence (no
// decision on any ledger for 2 s, longer when its recent decisions were
// slow, while a request waits). One holder is probed at most every
// 250 ms, one probe at a time, so a burst of waiting writes makes one call.
package leader
