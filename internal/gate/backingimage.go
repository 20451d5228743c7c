package gate

import (
	"context"
	"errors"
	"fmt"
	"sort"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
)

// backingImageVerdict decides a BackingImage write: every disk its
// spec.diskFileSpecMap gains must grant a copy of status.realSize bytes,
// the size Longhorn's node controller adds to the disk's storageScheduled.
// An image whose real size is not known yet is admitted; the mirror adopts
// its copies once Longhorn reports it.
func (g *Gate) backingImageVerdict(ctx context.Context, req admissionRequest) verdict {
	bi := &lhv1.BackingImage{}
	if err := req.decode(req.Object.Raw, bi); err != nil {
		return malformed(err)
	}
	var old *lhv1.BackingImage
	if req.isUpdate() {
		old = &lhv1.BackingImage{}
		if err := req.decode(req.OldObject.Raw, old); err != nil {
			return malformed(err)
		}
	}
	added, size, reason := copyNeed(old, bi)
	if reason != "" {
		return allow(reason)
	}
	if req.dryRun() {
		return allowWithWarning("dry run", fmt.Sprintf("dry run: copies of backing image %s were not requested from the ledgers", bi.Name))
	}

	var done []raised
	for _, disk := range added {
		ds, err := g.read(ctx, disk)
		if errors.Is(err, errNoLedger) {
			return g.putBackAll(ctx, done, imageRequests, deny(fmt.Sprintf("backing image %s needs a copy of %s on disk %s, which has no DiskSchedule yet", bi.Name, ledger.Bytes(size), disk)))
		}
		if err != nil {
			return g.putBackAll(ctx, done, imageRequests, failed(err))
		}
		if d, _ := ledger.BackingImageDecision(ds, bi.Name, size); d == ledger.Granted {
			continue
		}
		prev := int64(ds.Spec.BackingImages[bi.Name])
		gen, err := g.request(ctx, disk, func(ds *dsv1.DiskSchedule) bool { return setRequest(&ds.Spec.BackingImages, bi.Name, size) })
		if err != nil {
			return g.putBackAll(ctx, done, imageRequests, failed(err))
		}
		done = append(done, raised{disk: disk, name: bi.Name, size: size, prev: prev, gen: gen})
	}
	for _, r := range done {
		ds, err := g.await(ctx, r.disk, r.gen, func(ds *dsv1.DiskSchedule) bool {
			d, _ := ledger.BackingImageDecision(ds, bi.Name, size)
			return d != ledger.Pending
		})
		what := fmt.Sprintf("backing image %s needs a copy of %s on disk %s", bi.Name, ledger.Bytes(size), r.disk)
		if err != nil {
			return g.putBackAll(ctx, done, imageRequests, undecided(what, err))
		}
		if d, msg := ledger.BackingImageDecision(ds, bi.Name, size); d != ledger.Granted {
			return g.putBackAll(ctx, done, imageRequests, deny(fmt.Sprintf("backing image %s needs a copy of %s on %s: %s", bi.Name, ledger.Bytes(size), where(ds), msg)))
		}
	}
	return allow(fmt.Sprintf("copies of %s granted on %d disks", ledger.Bytes(size), len(added)))
}

// copyNeed returns the disks the write of bi (old is its previous version,
// nil for a create) adds to its spec.diskFileSpecMap, by name, and the
// bytes a copy takes on each: status.realSize, what Longhorn's node
// controller adds to a disk's storageScheduled (a qcow2 image's file may be
// smaller than its size). It returns why the write asks nothing instead
// when it adds no disk, or when the real size is not known yet: the mirror
// adopts those copies once it is.
func copyNeed(old, bi *lhv1.BackingImage) (added []string, size int64, reason string) {
	var had map[string]*lhv1.BackingImageDiskFileSpec
	if old != nil {
		had = old.Spec.DiskFileSpecMap
	}
	for disk := range bi.Spec.DiskFileSpecMap {
		if _, ok := had[disk]; !ok && disk != "" {
			added = append(added, disk)
		}
	}
	sort.Strings(added)
	switch {
	case len(added) == 0:
		return nil, 0, "the backing image gains no disk"
	case bi.Status.RealSize <= 0:
		return nil, 0, "the backing image's real size is not known yet; its copies are adopted once it is"
	}
	return added, bi.Status.RealSize, ""
}
