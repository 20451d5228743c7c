package gate

import (
	"context"
	"errors"
	"fmt"
	"sort"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/index"
	"github.com/longhorn/diskschedule/internal/ledger"
)

// raised is one ledger request the gate raised for a growth, with what to
// put back when the growth is refused.
type raised struct {
	disk, name string
	size, prev int64
	gen        int64
}

// volumeVerdict decides a Volume write: a volume whose spec.size grows is
// admitted only when the ledger of every disk holding one of its replicas
// granted the new size. When one refuses, what the others granted is put
// back and the write is denied with the refusing disk's numbers.
func (g *Gate) volumeVerdict(ctx context.Context, req admissionRequest) verdict {
	if !req.isUpdate() {
		return allow("a new volume has no replica on a disk yet")
	}
	vol, old := &lhv1.Volume{}, &lhv1.Volume{}
	if err := req.decode(req.Object.Raw, vol); err != nil {
		return malformed(err)
	}
	if err := req.decode(req.OldObject.Raw, old); err != nil {
		return malformed(err)
	}
	if vol.Spec.Size <= old.Spec.Size {
		return allow("the volume does not grow")
	}
	replicas := &lhv1.ReplicaList{}
	if err := g.client.List(ctx, replicas, client.InNamespace(g.namespace), client.MatchingFields{index.ReplicaByVolume: vol.Name}); err != nil {
		return failed(fmt.Errorf("listing the replicas of volume %s: %w", vol.Name, err))
	}
	sort.Slice(replicas.Items, func(i, j int) bool { return replicas.Items[i].Name < replicas.Items[j].Name })
	growth := fmt.Sprintf("volume %s grows from %s to %s", vol.Name, ledger.Bytes(old.Spec.Size), ledger.Bytes(vol.Spec.Size))
	if req.dryRun() {
		return allowWithWarning("dry run", "dry run: "+growth+" was not requested from the ledgers")
	}

	// One data directory is counted once: a clone sharing it (a live
	// migration, a live engine upgrade) grows with the replica counted.
	ledgers := map[string]*dsv1.DiskSchedule{}
	for i := range replicas.Items {
		if disk := replicas.Items[i].Spec.DiskID; disk != "" && ledgers[disk] == nil {
			ds, err := g.read(ctx, disk)
			if err != nil && !errors.Is(err, errNoLedger) {
				return failed(err)
			}
			ledgers[disk] = ds
		}
	}
	shared := ledger.SharedData(replicas.Items, func(r *lhv1.Replica) bool {
		ds := ledgers[r.Spec.DiskID]
		if ds == nil {
			return false
		}
		_, ok := ds.Spec.Replicas[r.Name]
		return ok
	})

	var done []raised
	refusal := ""
	for i := range replicas.Items {
		rep := &replicas.Items[i]
		if rep.Spec.DiskID == "" || shared[rep.Name] != "" {
			continue
		}
		r, msg, err := g.raise(ctx, rep, vol.Spec.Size)
		if err != nil {
			refusal = fmt.Sprintf("replica %s: %v", rep.Name, err)
			break
		}
		if msg != "" {
			refusal = msg
			break
		}
		if r != nil {
			done = append(done, *r)
		}
	}
	if refusal != "" {
		return g.putBackAll(ctx, done, replicaRequests, deny(growth+", but "+refusal))
	}
	for _, r := range done {
		ask := replicaAsk{replica: r.name, size: r.size}
		ds, err := g.await(ctx, r.disk, r.gen, ask.decided)
		if err != nil {
			return g.putBackAll(ctx, done, replicaRequests, undecided(growth, err))
		}
		if !ask.granted(ds) {
			return g.putBackAll(ctx, done, replicaRequests, deny(expansionRefusal(r.size-r.prev, r.disk, growth, ask.refusal(ds))))
		}
	}
	return allow(growth + ": granted on every disk of its replicas")
}

// expansionRefusal is the denial of a volume's growth that the ledger of
// disk refused, more bytes short: it says so in the words Longhorn's CSI
// driver maps to OutOfRange (csi/controller_server.go,
// ControllerExpandVolume, matches "failed to schedule .* more bytes to
// disk" in the error of its volume update), as it maps Longhorn's own
// capacity refusal, so the external resizer reports the expansion as
// infeasible instead of retrying it; then the growth and the ledger's
// numbers.
func expansionRefusal(more int64, disk, growth, ledgerSays string) string {
	return fmt.Sprintf("failed to schedule %d more bytes to disk %s: %s, but %s", more, disk, growth, ledgerSays)
}

// raise writes the replica's request at size on its disk's ledger; it
// returns nil when that size is already granted, and a refusal message
// when the disk has no ledger.
func (g *Gate) raise(ctx context.Context, rep *lhv1.Replica, size int64) (*raised, string, error) {
	ds, err := g.read(ctx, rep.Spec.DiskID)
	if errors.Is(err, errNoLedger) {
		return nil, fmt.Sprintf("disk %s of replica %s has no DiskSchedule", rep.Spec.DiskID, rep.Name), nil
	}
	if err != nil {
		return nil, "", err
	}
	ask := replicaAsk{replica: rep.Name, size: size}
	if ask.granted(ds) {
		return nil, "", nil
	}
	prev := int64(ds.Spec.Replicas[rep.Name])
	gen, err := g.request(ctx, rep.Spec.DiskID, ask.request)
	if err != nil {
		return nil, "", err
	}
	return &raised{disk: rep.Spec.DiskID, name: rep.Name, size: size, prev: prev, gen: gen}, "", nil
}

// putBackAll returns every request raised in done to what it was before
// (restoreRequest on the map requests picks from a ledger's spec), then
// answers v. It outlives the admission's deadline by a bounded time.
func (g *Gate) putBackAll(ctx context.Context, done []raised, requests func(*dsv1.DiskSchedule) map[string]dsv1.RequestedBytes, v verdict) verdict {
	ctx, cancel := cleanupContext(ctx)
	defer cancel()
	for _, r := range done {
		if err := g.putBack(ctx, r.disk, func(ds *dsv1.DiskSchedule) bool {
			return restoreRequest(requests(ds), r.name, r.size, r.prev)
		}); err != nil {
			g.log.Error(err, "Putting back a refused request", "disk", r.disk, "name", r.name)
		}
	}
	return v
}

// replicaRequests and imageRequests pick a ledger's replica and
// backing-image requests.
func replicaRequests(ds *dsv1.DiskSchedule) map[string]dsv1.RequestedBytes { return ds.Spec.Replicas }
func imageRequests(ds *dsv1.DiskSchedule) map[string]dsv1.RequestedBytes {
	return ds.Spec.BackingImages
}
