package mirror

import (
	"context"
	"fmt"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/index"
	"github.com/longhorn/diskschedule/internal/ledger"
)

// persisted reads from the cache what Longhorn has persisted on ds's disk
// (persistedOn).
func (r *Reconciler) persisted(ctx context.Context, ds *dsv1.DiskSchedule) (Persisted, error) {
	replicas := &lhv1.ReplicaList{}
	if err := r.client.List(ctx, replicas, client.InNamespace(ds.Namespace), client.MatchingFields{index.ReplicaByDisk: ds.Name}); err != nil {
		return Persisted{}, fmt.Errorf("listing the replicas on disk %s: %w", ds.Name, err)
	}
	images := &lhv1.BackingImageList{}
	if err := r.client.List(ctx, images, client.InNamespace(ds.Namespace), client.MatchingFields{index.BackingImageByDisk: ds.Name}); err != nil {
		return Persisted{}, fmt.Errorf("listing the backing images on disk %s: %w", ds.Name, err)
	}
	return persistedOn(ds, replicas.Items, images.Items), nil
}

// persistedOn returns what Longhorn has persisted on ds's disk, counted as
// Longhorn's node controller counts it: each replica whose spec.diskID is
// the disk at its own spec.volumeSize, each backing image whose
// spec.diskFileSpecMap lists the disk at its status.realSize (0 while not
// known). One data directory is counted once: a replica that shares its
// disk and data directory with another replica of its volume (a clone of a
// v1 live migration or a live engine upgrade) is counted under the one
// that has a ledger entry (ledger.SharedData), and an entry of its own is
// released at once.
func persistedOn(ds *dsv1.DiskSchedule, replicas []lhv1.Replica, images []lhv1.BackingImage) Persisted {
	out := Persisted{Replicas: map[string]int64{}, BackingImages: map[string]int64{}}
	shared := ledger.SharedData(replicas, func(r *lhv1.Replica) bool {
		_, ok := ds.Spec.Replicas[r.Name]
		return ok
	})
	for i := range replicas {
		rep := &replicas[i]
		if rep.Spec.DiskID != ds.Name {
			continue
		}
		if counted, ok := shared[rep.Name]; ok {
			out.lost(rep.Name, fmt.Sprintf("shares its data directory with replica %s, which counts it", counted))
			continue
		}
		out.Replicas[rep.Name] = max(rep.Spec.VolumeSize, 0)
	}
	for i := range images {
		bi := &images[i]
		if _, listed := bi.Spec.DiskFileSpecMap[ds.Name]; listed {
			out.BackingImages[bi.Name] = max(bi.Status.RealSize, 0)
		}
	}
	return out
}
