package requirement

import (
	"encoding/json"
	"fmt"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
)

// Request is one ledger entry a write of Longhorn's needs granted: Size
// bytes for the entry Name of the Kind map of the DiskSchedule Disk.
type Request struct {
	// Disk is the disk's UUID, the name of its DiskSchedule.
	Disk string
	// Kind is the map the entry lives in.
	Kind ledger.Kind
	// Name is the entry's name: the Replica's or the BackingImage's.
	Name string
	// Size is the bytes requested.
	Size int64
	// Volume names the volume whose reservation on Disk the request takes
	// over (rule 5), when the extender reserved there; "" for none.
	Volume string
	// Version is, for a write that places a replica on Disk, the Replica's
	// resourceVersion the write is admitted at, recorded with the request
	// (spec.replicaVersions) so the mirror releases the grant at once when
	// the write loses (rule 10); "" otherwise.
	Version string
	// Confirm admits a grant the cache shows only once the API server
	// still holds it: the cache may lag behind a release of the mirror's.
	Confirm bool
	// Words say the request's outcomes.
	Words Words
}

// Plan is what one write of Longhorn's asks of the ledgers: the pure
// verdict of its kind's package, which the Executor carries out.
type Plan struct {
	// Answer, when not nil, answers the write at once, without asking:
	// the write takes no new space, or cannot ask.
	Answer *Answer
	// Requests must all be granted for the write to be admitted; one
	// already granted at its size is admitted at once.
	Requests []Request
	// DryRun answers a dry run of a write with Requests: nothing is
	// written.
	DryRun Answer
	// KeepUndecided leaves a request that was not decided in time in the
	// ledger, so that Longhorn's retry finds it granted at once; otherwise
	// every request written is put back, as for a refusal.
	KeepUndecided bool
	// Admitted says why the write is admitted once every request is
	// granted and some had to be asked.
	Admitted string
	// AlreadyGranted says why it is admitted when every request was
	// granted already (or there is none); "" says Admitted.
	AlreadyGranted string
}

// admitted says why the write is admitted: every request is granted, and
// asked says whether any had to be asked.
func (p Plan) admitted(asked bool) string {
	if asked || p.AlreadyGranted == "" {
		return p.Admitted
	}
	return p.AlreadyGranted
}

// Admit is a plan that admits the write at once, for reason.
func Admit(reason string) Plan {
	a := Allow(reason)
	return Plan{Answer: &a}
}

// Decision returns ds's decision on r, and the ledger's message when it
// rejected it.
func Decision(ds *dsv1.DiskSchedule, r Request) (ledger.Decision, string) {
	return ledger.DecisionOf(ds, r.Kind, r.Name, r.Size)
}

// Granted reports whether ds grants r at its size.
func Granted(ds *dsv1.DiskSchedule, r Request) bool {
	d, _ := Decision(ds, r)
	return d == ledger.Granted
}

// decided reports whether ds has an answer for r.
func decided(r Request) func(*dsv1.DiskSchedule) bool {
	return func(ds *dsv1.DiskSchedule) bool {
		d, _ := Decision(ds, r)
		return d != ledger.Pending
	}
}

// requested returns the bytes ds's spec requests for r's entry now.
func requested(ds *dsv1.DiskSchedule, r Request) int64 {
	return int64((*ledger.Requests(&ds.Spec, r.Kind))[r.Name])
}

// before returns what r's entry is to be put back to when r is refused:
// what ds's spec requests for it, or, when that is r itself (written
// before, by an admission that did not see its decision), what the ledger
// had granted it.
func before(ds *dsv1.DiskSchedule, r Request) int64 {
	if prev := requested(ds, r); prev != r.Size {
		return prev
	}
	return scheduled(ds, r)
}

// scheduled returns the bytes ds's status grants r's entry.
func scheduled(ds *dsv1.DiskSchedule, r Request) int64 {
	return (*ledger.Decisions(&ds.Status, r.Kind))[r.Name].ScheduledSize
}

// Write is the edit that writes r into a ledger's spec: its size, the
// version its write is admitted at, and the reservation it takes over
// (rule 5). It reports a change.
func Write(r Request) func(*dsv1.DiskSchedule) bool {
	return func(ds *dsv1.DiskSchedule) bool {
		changed := setRequest(ledger.Requests(&ds.Spec, r.Kind), r.Name, r.Size)
		changed = recordVersion(ds, r) || changed
		if res, ok := ds.Spec.Reservations[r.Volume]; ok && res.Replica == "" && r.Volume != "" {
			res.Replica = r.Name
			ds.Spec.Reservations[r.Volume] = res
			changed = true
		}
		return changed
	}
}

// requestPatch returns the JSON merge patch that writes r into a ledger's
// spec as Write does when r takes over no reservation: its size and the
// version its write is admitted at. It names only r's keys, so it is
// written without the lock and cannot undo another writer's keys.
func requestPatch(r Request) ([]byte, error) {
	spec := map[string]any{r.Kind.Field(): map[string]int64{r.Name: r.Size}}
	if r.Version != "" {
		spec["replicaVersions"] = map[string]string{r.Name: r.Version}
	}
	patch, err := json.Marshal(map[string]any{"spec": spec})
	if err != nil {
		return nil, fmt.Errorf("writing the request of %s %s: %w", r.Kind, r.Name, err)
	}
	return patch, nil
}

// written reports whether ds's spec already holds r as Write writes it.
func written(ds *dsv1.DiskSchedule, r Request) bool {
	size, ok := (*ledger.Requests(&ds.Spec, r.Kind))[r.Name]
	return ok && int64(size) == r.Size && (r.Version == "" || ds.Spec.ReplicaVersions[r.Name] == r.Version)
}

// handsOff reports whether writing r names a reservation on ds for the
// handoff, which must be written with the lock.
func handsOff(ds *dsv1.DiskSchedule, r Request) bool {
	_, ok := ds.Spec.Reservations[r.Volume]
	return ok && r.Volume != ""
}

// recordVersion records the version a placement is admitted at; it
// reports a change.
func recordVersion(ds *dsv1.DiskSchedule, r Request) bool {
	if r.Version == "" || ds.Spec.ReplicaVersions[r.Name] == r.Version {
		return false
	}
	if ds.Spec.ReplicaVersions == nil {
		ds.Spec.ReplicaVersions = map[string]string{}
	}
	ds.Spec.ReplicaVersions[r.Name] = r.Version
	return true
}

// PutBack is the edit that returns r's entry to prev bytes (removing it,
// and a replica's admitted version, when prev is 0), unless someone
// changed it from r's size since. It reports a change.
func PutBack(r Request, prev int64) func(*dsv1.DiskSchedule) bool {
	return func(ds *dsv1.DiskSchedule) bool {
		requests := *ledger.Requests(&ds.Spec, r.Kind)
		if !restoreRequest(requests, r.Name, r.Size, prev) {
			return false
		}
		if _, still := requests[r.Name]; !still && r.Kind == ledger.Replica {
			delete(ds.Spec.ReplicaVersions, r.Name)
		}
		return true
	}
}

// Withdraw is the edit that takes back r when the ledger rejected it at
// its very size (a request rejected stays rejected): a new request is
// removed, a growth returns to what was granted before, so r is decided
// afresh. It reports a change.
func Withdraw(r Request) func(*dsv1.DiskSchedule) bool {
	return func(ds *dsv1.DiskSchedule) bool {
		if d, _ := Decision(ds, r); d != ledger.Rejected {
			return false
		}
		return PutBack(r, scheduled(ds, r))(ds)
	}
}

// setRequest sets m[name] to size, creating the map; it reports a change.
func setRequest(m *map[string]dsv1.RequestedBytes, name string, size int64) bool {
	if cur, ok := (*m)[name]; ok && int64(cur) == size {
		return false
	}
	if *m == nil {
		*m = map[string]dsv1.RequestedBytes{}
	}
	(*m)[name] = dsv1.RequestedBytes(size)
	return true
}

// restoreRequest puts m[name] back to prev (deleting it when prev is 0),
// unless someone changed it from ours since; it reports a change.
func restoreRequest(m map[string]dsv1.RequestedBytes, name string, ours, prev int64) bool {
	cur, ok := m[name]
	if !ok || int64(cur) != ours {
		return false
	}
	if prev <= 0 {
		delete(m, name)
	} else {
		m[name] = dsv1.RequestedBytes(prev)
	}
	return true
}

// Where names a ledger's disk for people: "disk disk-1 of node node-1".
func Where(ds *dsv1.DiskSchedule) string {
	return fmt.Sprintf("disk %s of node %s", ds.Spec.Name, ds.Spec.NodeID)
}
