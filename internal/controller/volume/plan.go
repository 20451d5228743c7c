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
// to OutOfRange (requirement.ExpansionRefusal) when the disk cannot hold
// the growth whatever else ends, otherwise in words it answers Internal,
// which the external resizer retries (requirement.RetriableRefusal).
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
	growth := fmt.Sprintf("volume %s grows from %s to %s", vol.Name, ledger.Bytes(old.Spec.Size), ledger.Bytes(vol.Spec.Size))
	p := requirement.Plan{Admitted: growth + ": granted on every disk of its replicas",
		DryRun: requirement.AllowWithWarning("dry run", "dry run: "+growth+" was not requested from the ledgers")}
	for i := range replicas {
		rep := &replicas[i]
		if rep.Spec.DiskID == "" || shared[rep.Name] != "" {
			continue
		}
		r := requirement.Request{Disk: rep.Spec.DiskID, Kind: ledger.Replica, Name: rep.Name, Size: vol.Spec.Size}
		r.Words = words(growth, r, persisted[r.Disk])
		p.Requests = append(p.Requests, r)
	}
	return p
}

// words says the outcomes of a replica's request r for the growth of its
// volume: refused, in a replica's words (replica.Words) wrapped for
// Longhorn's CSI driver, given what Longhorn persisted on r's disk
// (requirement.Refusal).
func words(growth string, r requirement.Request, persisted ledger.Owners) requirement.Words {
	w := replica.Words(r.Name, r.Size, r.Disk)
	w.NoLedger = fmt.Sprintf("%s, but disk %s of replica %s has no DiskSchedule", growth, r.Disk, r.Name)
	w.Gone = w.NoLedger
	w.Undecided = growth
	w.Growth, w.Persisted = growth, persisted
	return w
}
