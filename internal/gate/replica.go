package gate

import (
	"context"
	"errors"
	"fmt"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/index"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/ledgerclient"
)

// replicaAsk is what one Replica write asks of its disk's ledger: the
// replica's own volumeSize, as Longhorn's scheduler checks it. The copy of
// its backing image is asked for on its own, when Longhorn adds the disk to
// the image's spec.diskFileSpecMap (backingImageVerdict).
type replicaAsk struct {
	replica string
	volume  string
	size    int64
	// version is, for a write that places the replica on the disk (its
	// spec.diskID was another or none), the replica's resourceVersion the
	// write is admitted at; "" otherwise. It is recorded with the request
	// (spec.replicaVersions), so the mirror releases the grant at once when
	// the write loses (rule 10).
	version string
}

// replicaVerdict decides a Replica write: a replica whose spec.diskID
// becomes a disk, or whose volumeSize grows there, is admitted only once
// that disk's ledger granted volumeSize, unless it takes no new space
// (replicaNeed).
func (g *Gate) replicaVerdict(ctx context.Context, req admissionRequest) verdict {
	rep := &lhv1.Replica{}
	if err := req.decode(req.Object.Raw, rep); err != nil {
		return malformed(err)
	}
	var old *lhv1.Replica
	if req.isUpdate() {
		old = &lhv1.Replica{}
		if err := req.decode(req.OldObject.Raw, old); err != nil {
			return malformed(err)
		}
	}
	siblings := &lhv1.ReplicaList{}
	var ds *dsv1.DiskSchedule
	if rep.Spec.DiskID != "" && rep.Spec.VolumeName != "" {
		if err := g.client.List(ctx, siblings, client.InNamespace(g.namespace), client.MatchingFields{index.ReplicaByVolume: rep.Spec.VolumeName}); err != nil {
			return failed(fmt.Errorf("listing the replicas of volume %s: %w", rep.Spec.VolumeName, err))
		}
	}
	if rep.Spec.DiskID != "" {
		var err error
		if ds, err = g.read(ctx, rep.Spec.DiskID); err != nil && !errors.Is(err, errNoLedger) {
			return failed(err)
		}
	}
	ask, reason := replicaNeed(old, rep, siblings.Items, ds)
	if ask == nil {
		return allow(reason)
	}
	return g.askReplica(ctx, rep.Spec.DiskID, *ask, req.dryRun())
}

// replicaNeed returns what the write of rep (old is its previous version,
// nil for a create) asks of the ledger ds of its disk (nil when the disk
// has none), or nil and why it asks nothing: the replica has no disk or no
// size, stays on its disk without growing, or shares its disk and data
// directory with another replica of its volume (siblings, as the cache
// holds them): a clone Longhorn creates there for a v1 live migration or a
// live engine upgrade takes no new space, and one data directory is counted
// once, under the replica whose ledger entry counts it
// (ledger.SharedData).
func replicaNeed(old, rep *lhv1.Replica, siblings []lhv1.Replica, ds *dsv1.DiskSchedule) (*replicaAsk, string) {
	disk := rep.Spec.DiskID
	switch {
	case disk == "":
		return nil, "the replica has no disk yet"
	case old != nil && old.Spec.DiskID == disk && old.Spec.VolumeSize >= rep.Spec.VolumeSize:
		return nil, "the replica takes no new space"
	case rep.Spec.VolumeSize <= 0:
		return nil, "the replica asks for no space"
	}
	if counted := countedWith(old == nil, rep, siblings, ds); counted != "" {
		return nil, fmt.Sprintf("replica %s shares disk %s and data directory %s with replica %s of volume %s: it takes no new space",
			rep.Name, disk, rep.Spec.DataDirectoryName, counted, rep.Spec.VolumeName)
	}
	ask := &replicaAsk{replica: rep.Name, volume: rep.Spec.VolumeName, size: rep.Spec.VolumeSize}
	if old != nil && old.Spec.DiskID != disk {
		ask.version = old.ResourceVersion
	}
	return ask, ""
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
	if ask.granted(ds) && !dryRun {
		// The cache may lag behind a release (the mirror's, of a grant no
		// write backs): admit at once only what the API server still holds.
		if ds, err = g.readLive(ctx, disk); err != nil {
			return failed(err)
		}
	}
	if ask.granted(ds) {
		if dryRun || ask.version == "" || ds.Spec.ReplicaVersions[ask.replica] == ask.version {
			return allow(fmt.Sprintf("%s already granted on %s", ledger.Bytes(ask.size), where(ds)))
		}
		// A retry of a placement whose earlier write lost: record the
		// version this write is admitted at, with the lock, while the grant
		// is still there (the mirror may be releasing it).
		held, latest := false, ds
		if _, err := g.write(ctx, disk, func(cur *dsv1.DiskSchedule) bool {
			held, latest = ask.granted(cur), cur.DeepCopy()
			return held && ask.recordVersion(cur)
		}); err != nil {
			return failed(err)
		}
		if held {
			return allow(fmt.Sprintf("%s already granted on %s", ledger.Bytes(ask.size), where(ds)))
		}
		// Released meanwhile: ask afresh, from the version that says so.
		ds = latest
	}
	if dryRun {
		return allowWithWarning("dry run: the ledger was not asked", fmt.Sprintf("dry run: %s on %s was not requested from the ledger", ledger.Bytes(ask.size), where(ds)))
	}
	// A request the ledger rejected earlier at this very size stays
	// rejected; withdraw it so it is decided afresh.
	if d, _ := ledger.ReplicaDecision(ds, ask.replica, ask.size); d == ledger.Rejected {
		if err := g.putBack(ctx, disk, ask.withdraw); err != nil {
			return failed(err)
		}
	}
	// Written from the version read above (the API server's when the cache
	// lagged), so a request the cache still shows is written again.
	writer := mergeRequest
	if ask.handsOff(ds) {
		writer = ledgerclient.Edit
	}
	gen, err := g.editOn(ctx, ds, ask.request, writer)
	if errors.Is(err, errNoLedger) {
		return deny(fmt.Sprintf("replica %s needs %s on disk %s, which has no DiskSchedule any more", ask.replica, ledger.Bytes(ask.size), disk))
	}
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
	if err := g.putBack(cleanup, disk, ask.withdraw); err != nil {
		g.log.Error(err, "Withdrawing a rejected request", "disk", disk, "replica", ask.replica)
	}
	return deny(msg)
}

// request writes the replica's request with the version its write is
// admitted at, and names the volume's reservation on this disk for the
// handoff (rule 5).
func (a replicaAsk) request(ds *dsv1.DiskSchedule) bool {
	changed := setRequest(&ds.Spec.Replicas, a.replica, a.size)
	changed = a.recordVersion(ds) || changed
	if res, ok := ds.Spec.Reservations[a.volume]; ok && res.Replica == "" && a.volume != "" {
		res.Replica = a.replica
		ds.Spec.Reservations[a.volume] = res
		changed = true
	}
	return changed
}

// recordVersion records the version a placement is admitted at; it
// reports a change.
func (a replicaAsk) recordVersion(ds *dsv1.DiskSchedule) bool {
	if a.version == "" || ds.Spec.ReplicaVersions[a.replica] == a.version {
		return false
	}
	if ds.Spec.ReplicaVersions == nil {
		ds.Spec.ReplicaVersions = map[string]string{}
	}
	ds.Spec.ReplicaVersions[a.replica] = a.version
	return true
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
	if d, _ := ledger.ReplicaDecision(ds, a.replica, a.size); d != ledger.Rejected {
		return false
	}
	if !restoreRequest(ds.Spec.Replicas, a.replica, a.size, ds.Status.Replicas[a.replica].ScheduledSize) {
		return false
	}
	if _, requested := ds.Spec.Replicas[a.replica]; !requested {
		delete(ds.Spec.ReplicaVersions, a.replica)
	}
	return true
}

// decided reports whether the ask has an answer.
func (a replicaAsk) decided(ds *dsv1.DiskSchedule) bool {
	d, _ := ledger.ReplicaDecision(ds, a.replica, a.size)
	return d != ledger.Pending
}

// granted reports whether the replica's size is granted.
func (a replicaAsk) granted(ds *dsv1.DiskSchedule) bool {
	d, _ := ledger.ReplicaDecision(ds, a.replica, a.size)
	return d == ledger.Granted
}

// refusal says, in the ledger's numbers, why the ask was not granted.
func (a replicaAsk) refusal(ds *dsv1.DiskSchedule) string {
	d, msg := ledger.ReplicaDecision(ds, a.replica, a.size)
	if d == ledger.Missing {
		msg = "the request left the ledger before it was decided (withdrawn, or released because the replica moved on and no write can back it)"
	}
	return fmt.Sprintf("replica %s needs %s on %s: %s", a.replica, ledger.Bytes(a.size), where(ds), msg)
}
