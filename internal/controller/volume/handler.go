package volume

import (
	"context"
	"fmt"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/index"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/requirement"
)

// NewHandler returns the gate's answer to Volume writes: Plan on the
// volume's replicas and their disks' ledgers as the cache holds them (read
// only for a growth), carried out by exec.
func NewHandler(exec *requirement.Executor) func(context.Context, requirement.Admission) requirement.Answer {
	return requirement.Handler(exec, func() *lhv1.Volume { return &lhv1.Volume{} },
		func(ctx context.Context, old, vol *lhv1.Volume) (requirement.Plan, error) {
			if !TakesSpace(old, vol) {
				return Plan(old, vol, nil, nil, nil), nil
			}
			replicas := &lhv1.ReplicaList{}
			if err := exec.Reader().List(ctx, replicas, client.InNamespace(exec.Namespace()),
				client.MatchingFields{index.ReplicaByVolume: vol.Name}); err != nil {
				return requirement.Plan{}, fmt.Errorf("listing the replicas of volume %s: %w", vol.Name, err)
			}
			ledgers := map[string]*dsv1.DiskSchedule{}
			persisted := map[string]ledger.Owners{}
			for i := range replicas.Items {
				disk := replicas.Items[i].Spec.DiskID
				if _, read := ledgers[disk]; disk == "" || read {
					continue
				}
				ds, err := exec.Ledger(ctx, disk)
				if err != nil {
					return requirement.Plan{}, err
				}
				ledgers[disk] = ds
				if persisted[disk], err = persistedOn(ctx, exec.Reader(), exec.Namespace(), disk); err != nil {
					return requirement.Plan{}, err
				}
			}
			return Plan(old, vol, replicas.Items, ledgers, persisted), nil
		})
}

// persistedOn names what Longhorn persisted on the disk with UUID disk, as
// the cache holds it: Replicas whose spec.diskID is the disk, BackingImages
// whose spec.diskFileSpecMap lists it.
func persistedOn(ctx context.Context, c client.Reader, namespace, disk string) (ledger.Owners, error) {
	replicas := &lhv1.ReplicaList{}
	if err := c.List(ctx, replicas, client.InNamespace(namespace), client.MatchingFields{index.ReplicaByDisk: disk},
		client.UnsafeDisableDeepCopy); err != nil {
		return ledger.Owners{}, fmt.Errorf("listing the replicas on disk %s: %w", disk, err)
	}
	images := &lhv1.BackingImageList{}
	if err := c.List(ctx, images, client.InNamespace(namespace), client.MatchingFields{index.BackingImageByDisk: disk},
		client.UnsafeDisableDeepCopy); err != nil {
		return ledger.Owners{}, fmt.Errorf("listing the backing images on disk %s: %w", disk, err)
	}
	out := ledger.Owners{Replicas: map[string]bool{}, BackingImages: map[string]bool{}}
	for i := range replicas.Items {
		out.Replicas[replicas.Items[i].Name] = true
	}
	for i := range images.Items {
		out.BackingImages[images.Items[i].Name] = true
	}
	return out, nil
}
