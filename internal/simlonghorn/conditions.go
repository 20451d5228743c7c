package simlonghorn

import (
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// longhornTime formats t as Longhorn writes times into its objects (RFC 3339, UTC).
func longhornTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// setCondition sets the condition typ of conds as Longhorn does: status,
// reason and message replaced, lastTransitionTime set to now only when the
// status changes, and lastProbeTime left empty. It returns the new slice.
func setCondition(conds []lhv1.Condition, typ string, status lhv1.ConditionStatus, reason, message string, now time.Time) []lhv1.Condition {
	out := make([]lhv1.Condition, 0, len(conds)+1)
	found := false
	for _, c := range conds {
		if c.Type != typ {
			out = append(out, c)
			continue
		}
		found = true
		if c.Status != status {
			c.LastTransitionTime = longhornTime(now)
		}
		c.Status, c.Reason, c.Message = status, reason, message
		out = append(out, c)
	}
	if !found {
		out = append(out, lhv1.Condition{Type: typ, Status: status, Reason: reason, Message: message,
			LastTransitionTime: longhornTime(now)})
	}
	return out
}

// conflictRetry is how soon a write that conflicted is tried again.
const conflictRetry = 100 * time.Millisecond

// requeueOnConflict turns a write conflict into a quick, quiet retry: the
// object changed since it was read, and the next reconcile reads it again.
// A NotFound is the object gone, which needs nothing more.
func requeueOnConflict(err error) (reconcile.Result, error) {
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return reconcile.Result{}, nil
	case apierrors.IsConflict(err):
		return reconcile.Result{RequeueAfter: conflictRetry}, nil
	}
	return reconcile.Result{}, err
}
