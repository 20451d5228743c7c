package requirement

import (
	"fmt"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
)

// Words are what a plan says of one request's outcomes, written by the
// kind's package when it makes the plan. What only the outcome knows (the
// ledger that refused, what it said, the bytes asked beyond what was held)
// the Executor adds, the same way for every kind (Refusal).
type Words struct {
	// NoLedger says why the request cannot be asked: its disk has no
	// DiskSchedule.
	NoLedger string
	// Gone says why it cannot be asked when its disk's DiskSchedule went
	// away after the plan was made.
	Gone string
	// Undecided says what waited in vain for its decision.
	Undecided string
	// Needs opens its refusal, which goes on with the ledger's place and
	// message: "<Needs> on disk disk-1 of node node-1: <message>".
	Needs string
	// Withdrawn stands for the ledger's message when the request left the
	// ledger before it was decided; "" leaves the message empty.
	Withdrawn string
	// Growth, for the growth of a volume ("volume pvc-a grows from 10Gi to
	// 20Gi"), words the refusal for Longhorn's CSI driver: final
	// (ExpansionRefusal) when the disk cannot hold the request whatever
	// else ends, given what Longhorn persisted there (Persisted), and
	// retriable (RetriableRefusal) otherwise. "" for any other write.
	Growth string
	// Persisted names what Longhorn persisted on the request's disk, for
	// Growth.
	Persisted ledger.Owners
}

// Refusal says, in the numbers of the ledger ds, why it did not grant r,
// whose entry held prev bytes before the write asked for more, in r's
// words.
func Refusal(r Request, prev int64, ds *dsv1.DiskSchedule) string {
	w := r.Words
	d, msg := Decision(ds, r)
	if d == ledger.Missing && w.Withdrawn != "" {
		msg = w.Withdrawn
	}
	says := fmt.Sprintf("%s on %s: %s", w.Needs, Where(ds), msg)
	switch {
	case w.Growth == "":
		return says
	case !ledger.CanEverHold(ds, w.Persisted, r.Name, r.Size):
		return ExpansionRefusal(r.Size-prev, r.Disk, w.Growth, says)
	}
	return RetriableRefusal(r.Disk, w.Growth, says)
}

// ExpansionRefusal is the denial of a volume's growth that the ledger of
// disk refused, more bytes short, when the disk cannot hold it whatever
// else ends (ledger.CanEverHold): it says so in the words Longhorn's CSI
// driver maps to OutOfRange (csi/controller_server.go,
// ControllerExpandVolume, matches "failed to schedule .* more bytes to
// disk" in the error of its volume update), so the external resizer marks
// the claim ControllerResizeInfeasible instead of retrying; then the growth
// and the ledger's numbers. (Longhorn's own capacity refusal, "cannot
// schedule … more bytes to disk" from its replica scheduler, does not match
// that expression: CSI answers it Internal.)
func ExpansionRefusal(more int64, disk, growth, ledgerSays string) string {
	return fmt.Sprintf("failed to schedule %d more bytes to disk %s: %s, but %s", more, disk, growth, ledgerSays)
}

// RetriableRefusal is the denial of a volume's growth that the ledger of
// disk refused for now, though the disk can hold it once what the ledger
// holds beyond what Longhorn persisted there ends (a pending request, a
// grant in flight, a reservation): worded so Longhorn's CSI driver answers
// it Internal, which the external resizer retries with its backoff, and
// the resize completes once the refusal ends.
func RetriableRefusal(disk, growth, ledgerSays string) string {
	return fmt.Sprintf("%s, but %s; disk %s can hold it once space held beyond what Longhorn persisted there is released: retry",
		growth, ledgerSays, disk)
}
