package mirror

import (
	"context"
	"fmt"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/controller/backingimage"
	"github.com/longhorn/diskschedule/internal/controller/replica"
	"github.com/longhorn/diskschedule/internal/index"
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

// persistedOn returns what Longhorn has persisted on ds's disk, from each
// kind's rule: replica.Persisted for the replicas on the disk (replicas)
// and the entries whose Replicas are elsewhere (others),
// backingimage.Persisted for the copies.
func persistedOn(ds *dsv1.DiskSchedule, replicas []lhv1.Replica, images []lhv1.BackingImage, others map[string]*lhv1.Replica) Persisted {
	sizes, lost := replica.Persisted(ds, replicas, others)
	return Persisted{Replicas: sizes, BackingImages: backingimage.Persisted(ds.Name, images), Lost: lost}
}
