package mirror

import (
	"context"
	"fmt"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/controller/replica"
	"github.com/longhorn/diskschedule/internal/index"
	"github.com/longhorn/diskschedule/internal/ledger"
)

// persisted reads from the cache what Longhorn has persisted on ds's disk
// (persistedOn). The lists are the cache's own objects, not copies: they
// are only read.
func (r *Reconciler) persisted(ctx context.Context, ds *dsv1.DiskSchedule) (Persisted, error) {
	replicas := &lhv1.ReplicaList{}
	if err := r.client.List(ctx, replicas, client.InNamespace(ds.Namespace), client.MatchingFields{index.ReplicaByDisk: ds.Name},
		client.UnsafeDisableDeepCopy); err != nil {
		return Persisted{}, fmt.Errorf("listing the replicas on disk %s: %w", ds.Name, err)
	}
	images := &lhv1.BackingImageList{}
	if err := r.client.List(ctx, images, client.InNamespace(ds.Namespace), client.MatchingFields{index.BackingImageByDisk: ds.Name},
		client.UnsafeDisableDeepCopy); err != nil {
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

// persistedOn returns what Longhorn has persisted on ds's disk
// (ledger.PersistedByDisk, a shared data directory counted under the
// replica that has an entry in ds), from the replicas and backing images on
// the disk, and the entries no write will back (replica.Lost), from the
// Replicas of the entries that are elsewhere (others).
func persistedOn(ds *dsv1.DiskSchedule, replicas []lhv1.Replica, images []lhv1.BackingImage, others map[string]*lhv1.Replica) Persisted {
	on := ledger.PersistedByDisk(replicas, images, func(r *lhv1.Replica) bool {
		_, ok := ds.Spec.Replicas[r.Name]
		return ok
	})[ds.Name]
	return Persisted{Persisted: on, Lost: replica.Lost(ds, on.Shared, others)}
}
