package volume

import (
	"cmp"
	"fmt"
	"slices"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/controller/replica"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/requirement"
)

// TakesSpace reports whether the write of vol (old is its previous
// version, nil for a create) may take new space on its replicas' disks:
// its spec.size grows. It is the Go side of the webhook's matchCondition
// volume-grows; Plan asks nothing of a write it rejects.
func TakesSpace(old, vol *lhv1.Volume) bool {
	return old != nil && vol.Spec.Size > old.Spec.Size
}

// Plan is the verdict on a Volume write (DESIGN §4): a volume whose
// spec.size grows is admitted only when the ledger of every disk holding
// one of its replicas granted the new size to that replica; when one
// refuses, what the others granted is put back and the write is denied
// with the refusing disk's numbers: in the words Longhorn's CSI driver maps
// to OutOfRange (ExpansionRefusal) when the disk cannot hold the growth
// whatever else ends, otherwise in words it answers Internal, which the
// external resizer retries (RetriableRefusal).
//
// old is vol's previous version (nil for a create); replicas are its
// replicas as the cache holds them; ledgers are their disks' ledgers as
// the cache holds them, by disk UUID (nil: the disk has none); persisted
// names, by disk UUID, what Longhorn persisted on each of those disks. One
// data directory is counted once: a clone sharing it (a live migration, a
// live engine upgrade) grows with the replica counted (ledger.SharedData).
func Plan(old, vol *lhv1.Volume, replicas []lhv1.Replica, ledgers map[string]*dsv1.DiskSchedule, persisted map[string]ledger.Owners) requirement.Plan {
	switch {
	case old == nil:
		return requirement.Admit("a new volume has no replica on a disk yet")
	case !TakesSpace(old, vol):
		return requirement.Admit("the volume does not grow")
	}
	replicas = slices.Clone(replicas)
	slices.SortFunc(replicas, func(a, b lhv1.Replica) int { return cmp.Compare(a.Name, b.Name) })
	shared := ledger.SharedData(replicas, func(r *lhv1.Replica) bool {
		ds := ledgers[r.Spec.DiskID]
		if ds == nil {
			return false
		}
		_, ok := ds.Spec.Replicas[r.Name]
		return ok
	})
	w := words{growth: fmt.Sprintf("volume %s grows from %s to %s", vol.Name, ledger.Bytes(old.Spec.Size), ledger.Bytes(vol.Spec.Size)), persisted: persisted}
	p := requirement.Plan{Words: w, DryRun: requirement.AllowWithWarning("dry run", "dry run: "+w.growth+" was not requested from the ledgers")}
	for i := range replicas {
		rep := &replicas[i]
		if rep.Spec.DiskID == "" || shared[rep.Name] != "" {
			continue
		}
		p.Requests = append(p.Requests, requirement.Request{Disk: rep.Spec.DiskID, Kind: ledger.Replica, Name: rep.Name, Size: vol.Spec.Size})
	}
	return p
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

// words says the outcomes of a volume's growth.
type words struct {
	// growth is "volume pvc-a grows from 10Gi to 20Gi".
	growth string
	// persisted names, by disk UUID, what Longhorn persisted on each disk
	// of the volume's replicas.
	persisted map[string]ledger.Owners
}

// Admitted says every disk granted the growth.
func (w words) Admitted(bool, *dsv1.DiskSchedule) string {
	return w.growth + ": granted on every disk of its replicas"
}

// NoLedger says a replica's disk has no DiskSchedule.
func (w words) NoLedger(r requirement.Request, _ bool) string {
	return fmt.Sprintf("%s, but disk %s of replica %s has no DiskSchedule", w.growth, r.Disk, r.Name)
}

// Undecided says what waited for the decisions.
func (w words) Undecided(requirement.Request) string { return w.growth }

// Refused says why the growth was refused: in the words Longhorn's CSI
// driver maps to OutOfRange when the disk cannot hold it whatever else
// ends, otherwise in words it retries.
func (w words) Refused(r requirement.Request, prev int64, ds *dsv1.DiskSchedule) string {
	if !ledger.CanEverHold(ds, w.persisted[r.Disk], r.Name, r.Size) {
		return ExpansionRefusal(r.Size-prev, r.Disk, w.growth, replica.Refusal(r, ds))
	}
	return RetriableRefusal(r.Disk, w.growth, replica.Refusal(r, ds))
}
