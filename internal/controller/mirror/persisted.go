package mirror

import (
	"context"
	"fmt"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/index"
)

// persisted reads from the cache what Longhorn has persisted on ds's disk.
func (r *Reconciler) persisted(ctx context.Context, ds *dsv1.DiskSchedule) (Persisted, error) {
	out := Persisted{Replicas: map[string]int64{}, BackingImages: map[string]int64{}}
	replicas := &lhv1.ReplicaList{}
	if err := r.client.List(ctx, replicas, client.InNamespace(ds.Namespace), client.MatchingFields{index.ReplicaByDisk: ds.Name}); err != nil {
		return out, fmt.Errorf("listing the replicas on disk %s: %w", ds.Name, err)
	}
	volumes := map[string]int64{}
	for i := range replicas.Items {
		rep := &replicas.Items[i]
		size, err := r.volumeSize(ctx, ds.Namespace, rep.Spec.VolumeName, volumes)
		if err != nil {
			return out, err
		}
		out.Replicas[rep.Name] = max(rep.Spec.VolumeSize, size, 0)
	}
	images := &lhv1.BackingImageList{}
	if err := r.client.List(ctx, images, client.InNamespace(ds.Namespace), client.MatchingFields{index.BackingImageByDisk: ds.Name}); err != nil {
		return out, fmt.Errorf("listing the backing images on disk %s: %w", ds.Name, err)
	}
	for i := range images.Items {
		bi := &images.Items[i]
		if _, listed := bi.Spec.DiskFileSpecMap[ds.Name]; listed {
			out.BackingImages[bi.Name] = max(bi.Status.Size, 0)
		}
	}
	return out, nil
}

// volumeSize returns the named Volume's spec.size (0 when it is not
// found), remembering it in seen.
func (r *Reconciler) volumeSize(ctx context.Context, namespace, name string, seen map[string]int64) (int64, error) {
	if name == "" {
		return 0, nil
	}
	if size, ok := seen[name]; ok {
		return size, nil
	}
	v := &lhv1.Volume{}
	err := r.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, v)
	switch {
	case apierrors.IsNotFound(err):
		seen[name] = 0
	case err != nil:
		return 0, fmt.Errorf("reading volume %s: %w", name, err)
	default:
		seen[name] = v.Spec.Size
	}
	return seen[name], nil
}
