package gate

import (
	"context"
	"errors"
	"fmt"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
)

// replicaAsk is what one Replica write asks of its disk's ledger.
type replicaAsk struct {
	replica string
	volume  string
	size    int64
	// image and imageSize name the backing image whose copy the replica
	// needs on the same disk; image is "" when it needs none or the image's
	// size is not known yet (the mirror adopts the copy then).
	image     string
	imageSize int64
}

// replicaVerdict decides a Replica write: a replica whose spec.diskID
// becomes a disk, or whose volumeSize grows there, is admitted only once
// that disk's ledger granted volumeSize (and the copy of its backing image).
func (g *Gate) replicaVerdict(ctx context.Context, req admissionRequest) verdict {
	rep := &lhv1.Replica{}
	if err := req.decode(req.Object.Raw, rep); err != nil {
		return malformed(err)
	}
	disk := rep.Spec.DiskID
	if disk == "" {
		return allow("the replica has no disk yet")
	}
	if req.isUpdate() {
		old := &lhv1.Replica{}
		if err := req.decode(req.OldObject.Raw, old); err != nil {
			return malformed(err)
		}
		if old.Spec.DiskID == disk && old.Spec.VolumeSize >= rep.Spec.VolumeSize {
			return allow("the replica takes no new space")
		}
	}
	if rep.Spec.VolumeSize <= 0 {
		return allow("the replica asks for no space")
	}
	ask := replicaAsk{replica: rep.Name, volume: rep.Spec.VolumeName, size: rep.Spec.VolumeSize}
	if rep.Spec.BackingImage != "" {
		bi := &lhv1.BackingImage{}
		err := g.client.Get(ctx, client.ObjectKey{Namespace: g.namespace, Name: rep.Spec.BackingImage}, bi)
		if client.IgnoreNotFound(err) != nil {
			return failed(fmt.Errorf("reading backing image %s: %w", rep.Spec.BackingImage, err))
		}
		if err == nil && bi.Status.Size > 0 {
			ask.image, ask.imageSize = bi.Name, bi.Status.Size
		}
	}
	return g.askReplica(ctx, disk, ask, req.dryRun())
}

// askReplica requests ask on the ledger of disk and waits for the decision.
func (g *Gate) askReplica(ctx context.Context, disk string, ask replicaAsk, dryRun bool) verdict {
	ds, err := g.read(ctx, disk)
	if errors.Is(err, errNoLedger) {
		return deny(fmt.Sprintf("replica %s needs %s on disk %s, which has no DiskSchedule yet; it is admitted once the disk's ledger exists",
			ask.replica, ledger.Bytes(ask.size), disk))
	}
	if err != nil {
		return failed(err)
	}
	if ask.granted(ds) {
		return allow(fmt.Sprintf("%s already granted on %s", ledger.Bytes(ask.size), where(ds)))
	}
	if dryRun {
		return allowWithWarning("dry run: the ledger was not asked", fmt.Sprintf("dry run: %s on %s was not requested from the ledger", ledger.Bytes(ask.size), where(ds)))
	}
	// A request the ledger rejected earlier at this very size stays
	// rejected; withdraw it so it is decided afresh.
	if d, _ := ledger.ReplicaDecision(ds, ask.replica, ask.size); d == ledger.Rejected {
		if _, err := g.write(ctx, disk, ask.withdraw); err != nil {
			return failed(err)
		}
	}
	write := g.request
	if ask.handsOff(ds) {
		write = g.write
	}
	gen, err := write(ctx, disk, ask.request)
	if err != nil {
		return failed(err)
	}
	ds, err = g.await(ctx, disk, gen, ask.decided)
	if err != nil {
		return undecided(fmt.Sprintf("replica %s needs %s on disk %s", ask.replica, ledger.Bytes(ask.size), disk), err)
	}
	if ask.granted(ds) {
		return allow(fmt.Sprintf("%s granted on %s", ledger.Bytes(ask.size), where(ds)))
	}
	msg := ask.refusal(ds)
	// Leave nothing behind: a retry, here or on another disk, starts afresh.
	cleanup, cancel := cleanupContext(ctx)
	defer cancel()
	if _, err := g.write(cleanup, disk, ask.withdraw); err != nil {
		g.log.Error(err, "withdrawing a rejected request", "disk", disk, "replica", ask.replica)
	}
	return deny(msg)
}

// request writes the replica's request (and its backing image's copy), and
// names the volume's reservation on this disk for the handoff (rule 5).
func (a replicaAsk) request(ds *dsv1.DiskSchedule) bool {
	changed := setRequest(&ds.Spec.Replicas, a.replica, a.size)
	if res, ok := ds.Spec.Reservations[a.volume]; ok && res.Replica == "" && a.volume != "" {
		res.Replica = a.replica
		ds.Spec.Reservations[a.volume] = res
		changed = true
	}
	if a.image != "" {
		if d, _ := ledger.BackingImageDecision(ds, a.image, int64(ds.Spec.BackingImages[a.image])); d != ledger.Granted || int64(ds.Spec.BackingImages[a.image]) < a.imageSize {
			changed = setRequest(&ds.Spec.BackingImages, a.image, a.imageSize) || changed
		}
	}
	return changed
}

// handsOff reports whether request names a reservation on ds for the
// handoff, which must be written with the lock.
func (a replicaAsk) handsOff(ds *dsv1.DiskSchedule) bool {
	_, ok := ds.Spec.Reservations[a.volume]
	return ok && a.volume != ""
}

// withdraw puts back what the ledger rejected (a new request is removed, a
// growth returns to what was granted before), so nothing is left behind
// and a retry is decided afresh.
func (a replicaAsk) withdraw(ds *dsv1.DiskSchedule) bool {
	changed := false
	if d, _ := ledger.ReplicaDecision(ds, a.replica, a.size); d == ledger.Rejected {
		changed = restoreRequest(ds.Spec.Replicas, a.replica, a.size, ds.Status.Replicas[a.replica].ScheduledSize)
	}
	if a.image != "" {
		want := int64(ds.Spec.BackingImages[a.image])
		if d, _ := ledger.BackingImageDecision(ds, a.image, want); d == ledger.Rejected {
			changed = restoreRequest(ds.Spec.BackingImages, a.image, want, ds.Status.BackingImages[a.image].ScheduledSize) || changed
		}
	}
	return changed
}

// decided reports whether every part of the ask has an answer.
func (a replicaAsk) decided(ds *dsv1.DiskSchedule) bool {
	if d, _ := ledger.ReplicaDecision(ds, a.replica, a.size); d == ledger.Pending {
		return false
	}
	if a.image != "" {
		if d, _ := ledger.BackingImageDecision(ds, a.image, int64(ds.Spec.BackingImages[a.image])); d == ledger.Pending {
			return false
		}
	}
	return true
}

// granted reports whether the replica's size and its image's copy are granted.
func (a replicaAsk) granted(ds *dsv1.DiskSchedule) bool {
	if d, _ := ledger.ReplicaDecision(ds, a.replica, a.size); d != ledger.Granted {
		return false
	}
	if a.image == "" {
		return true
	}
	want := int64(ds.Spec.BackingImages[a.image])
	d, _ := ledger.BackingImageDecision(ds, a.image, want)
	return d == ledger.Granted && want >= a.imageSize
}

// refusal says, in the ledger's numbers, why the ask was not granted.
func (a replicaAsk) refusal(ds *dsv1.DiskSchedule) string {
	if d, msg := ledger.ReplicaDecision(ds, a.replica, a.size); d != ledger.Granted {
		if d == ledger.Missing {
			msg = "the request was withdrawn before it was decided"
		}
		return fmt.Sprintf("replica %s needs %s on %s: %s", a.replica, ledger.Bytes(a.size), where(ds), msg)
	}
	_, msg := ledger.BackingImageDecision(ds, a.image, int64(ds.Spec.BackingImages[a.image]))
	return fmt.Sprintf("replica %s needs a copy of backing image %s (%s) on %s: %s", a.replica, a.image, ledger.Bytes(a.imageSize), where(ds), msg)
}
