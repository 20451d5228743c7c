// Package ledgerclient is how requesters write to a DiskSchedule's spec,
// so concurrent requesters never lose each other's requests: Edit, PutBack
// and Mutate, a read-modify-write conditional on the resourceVersion read,
// retried from the API server's latest version on a conflict (PutBack
// until its context ends, for put-backs that must not fail); Merge, a
// merge patch of whole map keys without that condition, for keys no other
// writer changes.
package ledgerclient

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

// conflictBackoff retries a conflicting write many times with jitter: busy
// ledgers take writes from many requesters at once.
var conflictBackoff = wait.Backoff{Steps: 200, Duration: 5 * time.Millisecond, Factor: 1, Jitter: 2}

// Mutate applies change to the latest version of the DiskSchedule key, read
// with reader (the API server, not a cache, so a retry sees the version
// that won), and writes it with writer when change reports a change. It
// returns the written (or unchanged) object.
func Mutate(ctx context.Context, reader client.Reader, writer client.Writer, key client.ObjectKey,
	change func(ds *dsv1.DiskSchedule) bool) (*dsv1.DiskSchedule, error) {
	ds := &dsv1.DiskSchedule{}
	err := retry.RetryOnConflict(conflictBackoff, func() error {
		if err := reader.Get(ctx, key, ds); err != nil {
			return err
		}
		if !change(ds) {
			return nil
		}
		return writer.Update(ctx, ds)
	})
	if err != nil {
		return nil, fmt.Errorf("writing requests to DiskSchedule %s: %w", key.Name, err)
	}
	return ds, nil
}

// MaxEditAttempts bounds the optimistic-lock retries of one Edit.
const MaxEditAttempts = 20

// Edit applies change to a copy of cur, a DiskSchedule as a cache holds it,
// and writes the result as a merge patch conditional on cur's
// resourceVersion: one write when the cache is current. On a conflict it
// reads the latest version with api and tries again, up to
// MaxEditAttempts, calling conflicted (when not nil) for each lost race.
// change reports whether it changed anything; when it did not, nothing is
// written and Edit returns nil. Otherwise it returns the object written.
func Edit(ctx context.Context, c client.Writer, api client.Reader, cur *dsv1.DiskSchedule,
	change func(*dsv1.DiskSchedule) bool, conflicted func()) (*dsv1.DiskSchedule, error) {
	return edit(ctx, c, api, cur, change, conflicted, MaxEditAttempts)
}

// PutBack is Edit for a write that must not fail on a busy ledger: a
// requester taking back what the ledger refused it. It retries every
// conflict, from the latest version read with api each time, until ctx
// ends; after a few lost races in a row it pauses a few jittered
// milliseconds between tries, so writers racing for one ledger spread out.
func PutBack(ctx context.Context, c client.Writer, api client.Reader, cur *dsv1.DiskSchedule,
	change func(*dsv1.DiskSchedule) bool, conflicted func()) (*dsv1.DiskSchedule, error) {
	return edit(ctx, c, api, cur, change, conflicted, 0)
}

// edit is Edit with at most maxAttempts writes (0: until ctx ends).
func edit(ctx context.Context, c client.Writer, api client.Reader, cur *dsv1.DiskSchedule,
	change func(*dsv1.DiskSchedule) bool, conflicted func(), maxAttempts int) (*dsv1.DiskSchedule, error) {
	for attempt := 1; ; attempt++ {
		next := cur.DeepCopy()
		if !change(next) {
			return nil, nil
		}
		err := c.Patch(ctx, next, client.MergeFromWithOptions(cur, client.MergeFromWithOptimisticLock{}))
		if err == nil {
			return next, nil
		}
		if !apierrors.IsConflict(err) || attempt == maxAttempts {
			return nil, fmt.Errorf("writing to DiskSchedule %s: %w", cur.Name, err)
		}
		if conflicted != nil {
			conflicted()
		}
		if maxAttempts == 0 && attempt >= 3 {
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("writing to DiskSchedule %s after %d conflicts: %w", cur.Name, attempt, ctx.Err())
			case <-time.After(wait.Jitter(conflictBackoff.Duration, conflictBackoff.Jitter)):
			}
		}
		// The cache lags behind the write that won; read the latest.
		latest := &dsv1.DiskSchedule{}
		if err := api.Get(ctx, client.ObjectKeyFromObject(cur), latest); err != nil {
			return nil, fmt.Errorf("reading DiskSchedule %s again after a conflict: %w", cur.Name, err)
		}
		cur = latest
	}
}

// Merge applies change to a copy of cur, a DiskSchedule as a cache holds
// it, and writes the difference as a JSON merge patch with no
// resourceVersion precondition: the API server merges it into its latest
// version, so it never conflicts with other writers or with the
// controller's status writes, and loses none of their keys. It is for a
// writer that sets or removes whole map keys no other writer sets (the
// extender's reservations); a write that must see the latest version of a
// key another writer may change (a handoff, a put-back) takes Edit's lock.
// The difference is computed against cur, so a key the cache does not
// show yet is left as the server has it. change reports whether it changed
// anything; when it did not, nothing is written and Merge returns nil.
// Otherwise it returns the object written.
func Merge(ctx context.Context, c client.Writer, cur *dsv1.DiskSchedule, change func(*dsv1.DiskSchedule) bool) (*dsv1.DiskSchedule, error) {
	next := cur.DeepCopy()
	if !change(next) {
		return nil, nil
	}
	if err := c.Patch(ctx, next, client.MergeFrom(cur)); err != nil {
		return nil, fmt.Errorf("writing to DiskSchedule %s: %w", cur.Name, err)
	}
	return next, nil
}
