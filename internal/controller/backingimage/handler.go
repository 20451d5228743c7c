package backingimage

import (
	"context"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"

	"github.com/longhorn/diskschedule/internal/requirement"
)

// NewHandler returns the gate's answer to BackingImage writes: Plan,
// carried out by exec.
func NewHandler(exec *requirement.Executor) func(context.Context, requirement.Admission) requirement.Answer {
	return requirement.Handler(exec, func() *lhv1.BackingImage { return &lhv1.BackingImage{} },
		func(_ context.Context, old, bi *lhv1.BackingImage) (requirement.Plan, error) {
			return Plan(old, bi), nil
		})
}
