package volume

import (
	"context"
	"fmt"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/index"
	"github.com/longhorn/diskschedule/internal/requirement"
)

// NewHandler returns the gate's answer to Volume writes: Plan on the
// volume's replicas and their disks' ledgers as the cache holds them (read
// only for a growth), carried out by exec.
func NewHandler(exec *requirement.Executor) func(context.Context, requirement.Admission) requirement.Answer {
	return requirement.Handler(exec, func() *lhv1.Volume { return &lhv1.Volume{} },
		func(ctx context.Context, old, vol *lhv1.Volume) (requirement.Plan, error) {
			if !TakesSpace(old, vol) {
				return Plan(old, vol, nil, nil), nil
			}
			replicas := &lhv1.ReplicaList{}
			if err := exec.Reader().List(ctx, replicas, client.InNamespace(exec.Namespace()),
				client.MatchingFields{index.ReplicaByVolume: vol.Name}); err != nil {
				return requirement.Plan{}, fmt.Errorf("listing the replicas of volume %s: %w", vol.Name, err)
			}
			ledgers := map[string]*dsv1.DiskSchedule{}
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
			}
			return Plan(old, vol, replicas.Items, ledgers), nil
		})
}
