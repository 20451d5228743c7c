package diskschedule

import (
	"context"
	"fmt"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/clusterview"
	"github.com/longhorn/diskschedule/internal/index"
	"github.com/longhorn/diskschedule/internal/ledger"
)

// input reads everything one decision on ds depends on, from the cache.
func (r *Reconciler) input(ctx context.Context, ds *dsv1.DiskSchedule) (ledger.Input, error) {
	sched, _, err := clusterview.Settings(ctx, r.client, ds.Namespace)
	if err != nil {
		return ledger.Input{}, err
	}
	node := &lhv1.Node{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: ds.Namespace, Name: ds.Spec.NodeID}, node); err != nil {
		if !apierrors.IsNotFound(err) {
			return ledger.Input{}, fmt.Errorf("reading Longhorn node %s: %w", ds.Spec.NodeID, err)
		}
		node = nil
	}
	disk, found := ledger.DiskOf(node, ds.Spec.Name, ds.Name, sched.OverProvisioningPercentage, sched.MinimalAvailablePercentage)
	if !found {
		// The limit last known stays until the disk is back or its ledger goes.
		disk.Limit = ds.Status.StorageLimit
	}
	persisted, placed, err := r.persisted(ctx, ds)
	if err != nil {
		return ledger.Input{}, err
	}
	actual, err := r.actualSizes(ctx, ds, disk.Space)
	if err != nil {
		return ledger.Input{}, err
	}
	return ledger.Input{
		Spec:               ds.Spec,
		Generation:         ds.Generation,
		Previous:           ds.Status,
		Disk:               disk,
		Persisted:          persisted,
		PlacedVolumes:      placed,
		ActualSizes:        actual,
		ReservationTimeout: r.timeouts.NodeReservationTimeout(),
		Now:                r.clock.Now(),
	}, nil
}

// persisted names what Longhorn has persisted on ds's disk: Replicas whose
// spec.diskID is the disk and BackingImages whose spec.diskFileSpecMap
// lists it. Their new requests are adopted (rule 7). It also maps each of
// those replicas to its volume, for the reservations they take over.
func (r *Reconciler) persisted(ctx context.Context, ds *dsv1.DiskSchedule) (ledger.Owners, map[string]string, error) {
	replicas := &lhv1.ReplicaList{}
	if err := r.client.List(ctx, replicas, client.InNamespace(ds.Namespace), client.MatchingFields{index.ReplicaByDisk: ds.Name}); err != nil {
		return ledger.Owners{}, nil, fmt.Errorf("listing the replicas on disk %s: %w", ds.Name, err)
	}
	images := &lhv1.BackingImageList{}
	if err := r.client.List(ctx, images, client.InNamespace(ds.Namespace), client.MatchingFields{index.BackingImageByDisk: ds.Name}); err != nil {
		return ledger.Owners{}, nil, fmt.Errorf("listing the backing images on disk %s: %w", ds.Name, err)
	}
	out := ledger.Owners{Replicas: map[string]bool{}, BackingImages: map[string]bool{}}
	placed := map[string]string{}
	for i := range replicas.Items {
		out.Replicas[replicas.Items[i].Name] = true
		if v := replicas.Items[i].Spec.VolumeName; v != "" {
			placed[replicas.Items[i].Name] = v
		}
	}
	for i := range images.Items {
		out.BackingImages[images.Items[i].Name] = true
	}
	return out, placed, nil
}

// actualSizes returns, for each replica request of ds that Longhorn's disk
// status does not count yet (space), the bytes of data its replica holds:
// its Volume's status.actualSize, which Longhorn's scheduler takes as the
// replica's required storage. A replica or volume not in the cache holds
// none.
func (r *Reconciler) actualSizes(ctx context.Context, ds *dsv1.DiskSchedule, space *ledger.ActualSpace) (map[string]int64, error) {
	if space == nil {
		return nil, nil
	}
	out := map[string]int64{}
	volumes := map[string]int64{}
	for name := range ds.Spec.Replicas {
		if space.Replicas[name] {
			continue
		}
		rep := &lhv1.Replica{}
		if err := r.client.Get(ctx, client.ObjectKey{Namespace: ds.Namespace, Name: name}, rep); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("reading replica %s: %w", name, err)
		}
		volume := rep.Spec.VolumeName
		size, seen := volumes[volume]
		if !seen && volume != "" {
			v := &lhv1.Volume{}
			err := r.client.Get(ctx, client.ObjectKey{Namespace: ds.Namespace, Name: volume}, v)
			if client.IgnoreNotFound(err) != nil {
				return nil, fmt.Errorf("reading volume %s: %w", volume, err)
			}
			size = v.Status.ActualSize
			volumes[volume] = size
		}
		if size > 0 {
			out[name] = size
		}
	}
	return out, nil
}
