package replica

import (
	"context"
	"fmt"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/index"
	"github.com/longhorn/diskschedule/internal/requirement"
)

// NewHandler returns the gate's answer to Replica writes: Plan on the
// volume's replicas and the disk's ledger as the cache holds them, carried
// out by exec.
func NewHandler(exec *requirement.Executor) func(context.Context, requirement.Admission) requirement.Answer {
	return requirement.Handler(exec, func() *lhv1.Replica { return &lhv1.Replica{} },
		func(ctx context.Context, old, rep *lhv1.Replica) (requirement.Plan, error) {
			siblings := &lhv1.ReplicaList{}
			var ds *dsv1.DiskSchedule
			if rep.Spec.DiskID != "" && rep.Spec.VolumeName != "" {
				if err := exec.Reader().List(ctx, siblings, client.InNamespace(exec.Namespace()),
					client.MatchingFields{index.ReplicaByVolume: rep.Spec.VolumeName}); err != nil {
					return requirement.Plan{}, fmt.Errorf("listing the replicas of volume %s: %w", rep.Spec.VolumeName, err)
				}
			}
			if rep.Spec.DiskID != "" {
				var err error
				if ds, err = exec.Ledger(ctx, rep.Spec.DiskID); err != nil {
					return requirement.Plan{}, err
				}
			}
			return Plan(old, rep, siblings.Items, ds), nil
		})
}
