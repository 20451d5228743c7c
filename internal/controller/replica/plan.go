package replica

import (
	"fmt"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/requirement"
)

// TakesSpace reports whether the write of rep (old is its previous
// version, nil for a create) may take new space on a disk: rep has a disk
// and a size, and it comes onto that disk (from none or another) or grows
// there. It is the Go side of the webhook's matchCondition
// replica-takes-a-disk; Plan asks nothing of a write it rejects.
func TakesSpace(old, rep *lhv1.Replica) bool {
	disk := rep.Spec.DiskID
	switch {
	case disk == "", rep.Spec.VolumeSize <= 0:
		return false
	case old != nil && old.Spec.DiskID == disk && old.Spec.VolumeSize >= rep.Spec.VolumeSize:
		return false
	}
	return true
}

// Plan is the verdict on a Replica write (DESIGN §4): a replica whose
// spec.diskID becomes a disk, or whose volumeSize grows there, is admitted
// only once that disk's ledger granted its own volumeSize, as Longhorn's
// scheduler checks it; a grant already there admits it at once. The copy
// of its backing image is asked for on its own, when Longhorn adds the
// disk to the image (backingimage.Plan).
//
// old is rep's previous version (nil for a create); siblings are the
// replicas of its volume as the cache holds them; ds is its disk's ledger
// as the cache holds it (nil when the disk has none). A replica that
// shares its disk and data directory with another replica of its volume
// (a clone Longhorn creates for a v1 live migration or a live engine
// upgrade) takes no new space: one data directory is counted once, under
// the replica whose ledger entry counts it (ledger.SharedData).
//
// A placement's request records the Replica's resourceVersion its write is
// admitted at (spec.replicaVersions), so that what was granted for a write
// that lost is released by the mirror at once (rule 10), and names the
// volume's reservation on the disk for the handoff (rule 5). A request not
// decided in time stays, so Longhorn's retry finds it granted at once.
func Plan(old, rep *lhv1.Replica, siblings []lhv1.Replica, ds *dsv1.DiskSchedule) requirement.Plan {
	disk := rep.Spec.DiskID
	switch {
	case disk == "":
		return requirement.Admit("the replica has no disk yet")
	case old != nil && old.Spec.DiskID == disk && old.Spec.VolumeSize >= rep.Spec.VolumeSize:
		return requirement.Admit("the replica takes no new space")
	case !TakesSpace(old, rep):
		return requirement.Admit("the replica asks for no space")
	}
	if counted := countedWith(old == nil, rep, siblings, ds); counted != "" {
		return requirement.Admit(fmt.Sprintf("replica %s shares disk %s and data directory %s with replica %s of volume %s: it takes no new space",
			rep.Name, disk, rep.Spec.DataDirectoryName, counted, rep.Spec.VolumeName))
	}
	r := requirement.Request{Disk: disk, Kind: ledger.Replica, Name: rep.Name, Size: rep.Spec.VolumeSize,
		Volume: rep.Spec.VolumeName, Confirm: true}
	if old != nil && old.Spec.DiskID != disk {
		r.Version = old.ResourceVersion
	}
	w := words{r}
	return requirement.Plan{Requests: []requirement.Request{r}, DryRun: dryRun(r, ds, w), KeepUndecided: true, Words: w}
}

// dryRun answers a dry run of the write asking r of ds: denied when the
// disk has no ledger, admitted when granted already, admitted with a
// warning otherwise (the ledger is not asked).
func dryRun(r requirement.Request, ds *dsv1.DiskSchedule, w words) requirement.Answer {
	switch {
	case ds == nil:
		return requirement.Deny(w.NoLedger(r, false))
	case requirement.Granted(ds, r):
		return requirement.Allow(w.Admitted(false, ds))
	}
	return requirement.AllowWithWarning("dry run: the ledger was not asked",
		fmt.Sprintf("dry run: %s on %s was not requested from the ledger", ledger.Bytes(r.Size), requirement.Where(ds)))
}

// countedWith returns the replica whose ledger entry counts rep's data
// directory when rep shares it with another replica of its volume, or "".
// A created replica that shares one is never the one counted: the directory
// exists already.
func countedWith(create bool, rep *lhv1.Replica, siblings []lhv1.Replica, ds *dsv1.DiskSchedule) string {
	others := make([]lhv1.Replica, 0, len(siblings)+1)
	for i := range siblings {
		if siblings[i].Name == rep.Name {
			continue
		}
		if create && ledger.SharesData(rep, &siblings[i]) {
			return siblings[i].Name
		}
		others = append(others, siblings[i])
	}
	if create {
		return ""
	}
	hasEntry := func(r *lhv1.Replica) bool {
		if ds == nil {
			return false
		}
		_, ok := ds.Spec.Replicas[r.Name]
		return ok
	}
	return ledger.SharedData(append(others, *rep), hasEntry)[rep.Name]
}

// words says the outcomes of a replica's request r.
type words struct{ r requirement.Request }

// Admitted says the replica's size is granted on ds.
func (w words) Admitted(asked bool, ds *dsv1.DiskSchedule) string {
	if asked {
		return fmt.Sprintf("%s granted on %s", ledger.Bytes(w.r.Size), requirement.Where(ds))
	}
	return fmt.Sprintf("%s already granted on %s", ledger.Bytes(w.r.Size), requirement.Where(ds))
}

// NoLedger says the replica's disk has no DiskSchedule.
func (words) NoLedger(r requirement.Request, gone bool) string {
	if gone {
		return fmt.Sprintf("replica %s needs %s on disk %s, which has no DiskSchedule any more", r.Name, ledger.Bytes(r.Size), r.Disk)
	}
	return fmt.Sprintf("replica %s needs %s on disk %s, which has no DiskSchedule yet; it is admitted once the disk's ledger exists",
		r.Name, ledger.Bytes(r.Size), r.Disk)
}

// Undecided says what waited for the decision.
func (words) Undecided(r requirement.Request) string {
	return fmt.Sprintf("replica %s needs %s on disk %s", r.Name, ledger.Bytes(r.Size), r.Disk)
}

// Refused says, in the ledger's numbers, why r was not granted.
func (words) Refused(r requirement.Request, _ int64, ds *dsv1.DiskSchedule) string {
	return Refusal(r, ds)
}

// Refusal says, in the numbers of the ledger ds, why the replica's request
// r was not granted.
func Refusal(r requirement.Request, ds *dsv1.DiskSchedule) string {
	d, msg := requirement.Decision(ds, r)
	if d == ledger.Missing {
		msg = "the request left the ledger before it was decided (withdrawn, or released because the replica moved on and no write can back it)"
	}
	return fmt.Sprintf("replica %s needs %s on %s: %s", r.Name, ledger.Bytes(r.Size), requirement.Where(ds), msg)
}
