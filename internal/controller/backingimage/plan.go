package backingimage

import (
	"fmt"
	"slices"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"

	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/requirement"
)

// Added returns the disks the write of bi (old is its previous version,
// nil for a create) adds to its spec.diskFileSpecMap, sorted.
func Added(old, bi *lhv1.BackingImage) []string {
	var had map[string]*lhv1.BackingImageDiskFileSpec
	if old != nil {
		had = old.Spec.DiskFileSpecMap
	}
	var added []string
	for disk := range bi.Spec.DiskFileSpecMap {
		if _, ok := had[disk]; !ok && disk != "" {
			added = append(added, disk)
		}
	}
	slices.Sort(added)
	return added
}

// TakesSpace reports whether the write of bi (old is its previous
// version, nil for a create) may take new space: its spec.diskFileSpecMap
// gains a disk. It is the Go side of the webhook's matchCondition
// backing-image-gains-a-disk; Plan asks nothing of a write it rejects.
func TakesSpace(old, bi *lhv1.BackingImage) bool {
	return len(Added(old, bi)) > 0
}

// Plan is the verdict on a BackingImage write (DESIGN §4): every disk its
// spec.diskFileSpecMap gains must grant a copy of status.realSize bytes,
// the size Longhorn's node controller adds to the disk's storageScheduled
// (a qcow2 image's file may be smaller than its size). An image whose real
// size is not known yet is admitted; the mirror adopts its copies once
// Longhorn reports it. When one disk refuses, what the others granted is
// put back. old is bi's previous version, nil for a create.
func Plan(old, bi *lhv1.BackingImage) requirement.Plan {
	added := Added(old, bi)
	switch {
	case len(added) == 0:
		return requirement.Admit("the backing image gains no disk")
	case bi.Status.RealSize <= 0:
		return requirement.Admit("the backing image's real size is not known yet; its copies are adopted once it is")
	}
	size := bi.Status.RealSize
	p := requirement.Plan{Admitted: fmt.Sprintf("copies of %s granted on %d disks", ledger.Bytes(size), len(added)),
		DryRun: requirement.AllowWithWarning("dry run", fmt.Sprintf("dry run: copies of backing image %s were not requested from the ledgers", bi.Name))}
	needs := fmt.Sprintf("backing image %s needs a copy of %s", bi.Name, ledger.Bytes(size))
	for _, disk := range added {
		p.Requests = append(p.Requests, requirement.Request{Disk: disk, Kind: ledger.BackingImage, Name: bi.Name, Size: size,
			Words: requirement.Words{
				NoLedger:  fmt.Sprintf("%s on disk %s, which has no DiskSchedule yet", needs, disk),
				Gone:      fmt.Sprintf("%s on disk %s, which has no DiskSchedule any more", needs, disk),
				Undecided: fmt.Sprintf("%s on disk %s", needs, disk),
				Needs:     needs,
			}})
	}
	return p
}
