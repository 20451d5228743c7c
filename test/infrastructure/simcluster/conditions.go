package simcluster

import (
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

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
