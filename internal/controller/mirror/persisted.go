package mirror

import (
	"context"
	"fmt"
	"strconv"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	// The Replicas of the entries not on this disk, as the cache holds them:
	// one persisted on another disk, or whose admitted write lost, backs
	// nothing here any more.
	elsewhere := map[string]*lhv1.Replica{}
	here := map[string]bool{}
	for i := range replicas.Items {
		here[replicas.Items[i].Name] = true
	}
	for name := range ds.Spec.Replicas {
		if here[name] {
			continue
		}
		rep := &lhv1.Replica{}
		err := r.client.Get(ctx, client.ObjectKey{Namespace: ds.Namespace, Name: name}, rep)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return Persisted{}, fmt.Errorf("reading replica %s: %w", name, err)
		default:
			elsewhere[name] = rep
		}
	}
	return persistedOn(ds, replicas.Items, images.Items, elsewhere), nil
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
//
// others are the Replicas of entries that are not on the disk. An entry of
// one that Longhorn persisted on another disk will not be backed here
// (Longhorn does not move a placed replica between disks), nor one whose
// resourceVersion has moved past the version the write placing it here was
// admitted at (spec.replicaVersions) without this disk: that write lost.
// Both are lost, released at once.
func persistedOn(ds *dsv1.DiskSchedule, replicas []lhv1.Replica, images []lhv1.BackingImage, others map[string]*lhv1.Replica) Persisted {
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
	for name, rep := range others {
		admitted := ds.Spec.ReplicaVersions[name]
		switch {
		case rep.Spec.DiskID != "" && rep.Spec.DiskID != ds.Name:
			out.lost(name, "persisted on disk "+rep.Spec.DiskID)
		case movedPast(rep.ResourceVersion, admitted):
			out.lost(name, fmt.Sprintf("the write placing it here lost: the replica moved from resourceVersion %s to %s without this disk",
				admitted, rep.ResourceVersion))
		}
	}
	for i := range images {
		bi := &images[i]
		if _, listed := bi.Spec.DiskFileSpecMap[ds.Name]; listed {
			out.BackingImages[bi.Name] = max(bi.Status.RealSize, 0)
		}
	}
	return out
}

// movedPast reports whether resourceVersion current is later than
// admitted. The API server's resourceVersions are opaque to clients in
// general; kube-apiserver's are etcd revisions, increasing integers, and
// are compared as such. Versions that are not (or none recorded) are never
// later: the entry then waits for the grace period.
func movedPast(current, admitted string) bool {
	c, errC := strconv.ParseUint(current, 10, 64)
	a, errA := strconv.ParseUint(admitted, 10, 64)
	return errC == nil && errA == nil && c > a
}
