package requirement

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
)

// Handler returns the answer to the admission requests of one kind of
// Longhorn object T: it decodes the new object and, for an UPDATE, the old
// one (nil for a CREATE), has plan read its inputs and make the kind's
// plan, and carries the plan out with e.
func Handler[T runtime.Object](e *Executor, newObject func() T, plan func(ctx context.Context, old, obj T) (Plan, error)) func(context.Context, Admission) Answer {
	return func(ctx context.Context, req Admission) Answer {
		obj := newObject()
		if err := req.Decode(req.Object.Raw, obj); err != nil {
			return Malformed(err)
		}
		var old T
		if req.IsUpdate() {
			old = newObject()
			if err := req.Decode(req.OldObject.Raw, old); err != nil {
				return Malformed(err)
			}
		}
		p, err := plan(ctx, old, obj)
		if err != nil {
			return Failed(err)
		}
		return e.Execute(ctx, p, req.DryRun())
	}
}
