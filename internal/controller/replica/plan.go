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
	r.Words = Words(r.Name, r.Size, disk)
	where := "disk " + disk // a ledger the cache does not hold yet
	if ds != nil {
		where = requirement.Where(ds)
	}
	p := requirement.Plan{Requests: []requirement.Request{r}, KeepUndecided: true,
		Admitted:       fmt.Sprintf("%s granted on %s", ledger.Bytes(r.Size), where),
		AlreadyGranted: fmt.Sprintf("%s already granted on %s", ledger.Bytes(r.Size), where)}
	p.DryRun = dryRun(p, ds)
	return p
}

// Words says the outcomes of the request of replica for size bytes on the
// disk with UUID disk, in the ledger's numbers.
func Words(replica string, size int64, disk string) requirement.Words {
	needs := fmt.Sprintf("replica %s needs %s", replica, ledger.Bytes(size))
	return requirement.Words{
		NoLedger:  fmt.Sprintf("%s on disk %s, which has no DiskSchedule yet; it is admitted once the disk's ledger exists", needs, disk),
		Gone:      fmt.Sprintf("%s on disk %s, which has no DiskSchedule any more", needs, disk),
		Undecided: fmt.Sprintf("%s on disk %s", needs, disk),
		Needs:     needs,
		Withdrawn: "the request left the ledger before it was decided (withdrawn, or released because the replica moved on and no write can back it)",
	}
}

// dryRun answers a dry run of the write p asks of ds: denied when the disk
// has no ledger, admitted when granted already, admitted with a warning
// otherwise (the ledger is not asked).
func dryRun(p requirement.Plan, ds *dsv1.DiskSchedule) requirement.Answer {
	r := p.Requests[0]
	switch {
	case ds == nil:
		return requirement.Deny(r.Words.NoLedger)
	case requirement.Granted(ds, r):
		return requirement.Allow(p.AlreadyGranted)
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
