package gate

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledgerclient"
)

// errNoLedger says a disk has no DiskSchedule yet.
var errNoLedger = errors.New("no ledger")

// read returns the named DiskSchedule from the cache, or errNoLedger.
func (g *Gate) read(ctx context.Context, disk string) (*dsv1.DiskSchedule, error) {
	ds := &dsv1.DiskSchedule{}
	err := g.client.Get(ctx, client.ObjectKey{Namespace: g.namespace, Name: disk}, ds)
	if apierrors.IsNotFound(err) {
		return nil, errNoLedger
	}
	if err != nil {
		return nil, fmt.Errorf("reading the ledger of disk %s: %w", disk, err)
	}
	return ds, nil
}

// readLive reads the named DiskSchedule from the API server, not the cache.
func (g *Gate) readLive(ctx context.Context, disk string) (*dsv1.DiskSchedule, error) {
	ds := &dsv1.DiskSchedule{}
	err := g.apiReader.Get(ctx, client.ObjectKey{Namespace: g.namespace, Name: disk}, ds)
	if apierrors.IsNotFound(err) {
		return nil, errNoLedger
	}
	if err != nil {
		return nil, fmt.Errorf("reading the ledger of disk %s from the API server: %w", disk, err)
	}
	return ds, nil
}

// write applies edit to the named DiskSchedule's spec and writes it with the
// resourceVersion it was read at (ledgerclient.Edit), reading again and
// retrying on a conflict. edit reports whether it changed anything; when it
// did not, nothing is written and the generation returned is 0. Otherwise
// the generation returned is the one the write produced: its decision is
// final once status.observedGeneration reaches it.
func (g *Gate) write(ctx context.Context, disk string, edit func(*dsv1.DiskSchedule) bool) (int64, error) {
	return g.edit(ctx, disk, edit, ledgerclient.Edit)
}

// putBack is write for taking back what the ledger refused (a withdrawal, a
// refused growth put back): it keeps the lock, since it must see whether
// the latest version still holds what it wrote, and retries every conflict
// until ctx ends (ledgerclient.PutBack), so it does not fail on a busy
// ledger.
func (g *Gate) putBack(ctx context.Context, disk string, edit func(*dsv1.DiskSchedule) bool) error {
	_, err := g.edit(ctx, disk, edit, ledgerclient.PutBack)
	return err
}

// edit reads the named DiskSchedule from the cache and writes edit with
// writer.
func (g *Gate) edit(ctx context.Context, disk string, edit func(*dsv1.DiskSchedule) bool,
	writer func(context.Context, client.Writer, client.Reader, *dsv1.DiskSchedule, func(*dsv1.DiskSchedule) bool, func()) (*dsv1.DiskSchedule, error)) (int64, error) {
	ds, err := g.read(ctx, disk)
	if err != nil {
		return 0, err
	}
	return g.editOn(ctx, ds, edit, writer)
}

// editOn writes edit with writer, starting from base (a version the
// caller read, from the cache or the API server).
func (g *Gate) editOn(ctx context.Context, base *dsv1.DiskSchedule, edit func(*dsv1.DiskSchedule) bool,
	writer func(context.Context, client.Writer, client.Reader, *dsv1.DiskSchedule, func(*dsv1.DiskSchedule) bool, func()) (*dsv1.DiskSchedule, error)) (int64, error) {
	written, err := writer(ctx, g.client, g.apiReader, base.DeepCopy(), edit, g.metrics.LedgerConflicts.Inc)
	if apierrors.IsNotFound(err) {
		return 0, errNoLedger
	}
	if err != nil || written == nil {
		return 0, err
	}
	return written.Generation, nil
}

// request is write for an edit that only sets request keys (a replica's or
// a backing image's size): a merge patch without the resourceVersion lock
// (ledgerclient.Merge), which never loses the race to the other writers
// and the controller's status writes on a busy ledger. A handoff to a
// reservation and a put-back keep write's lock: they depend on what the
// latest version holds.
func (g *Gate) request(ctx context.Context, disk string, edit func(*dsv1.DiskSchedule) bool) (int64, error) {
	return g.edit(ctx, disk, edit, mergeRequest)
}

// mergeRequest writes a request edit as a merge patch (ledgerclient.Merge).
func mergeRequest(ctx context.Context, c client.Writer, _ client.Reader, cur *dsv1.DiskSchedule,
	change func(*dsv1.DiskSchedule) bool, _ func()) (*dsv1.DiskSchedule, error) {
	return ledgerclient.Merge(ctx, c, cur, change)
}

// await waits until the named DiskSchedule's controller has decided
// generation gen and done says the answer is there, and returns the ledger
// as the informer delivered it. It returns ctx's error when the decision
// does not come in time.
func (g *Gate) await(ctx context.Context, disk string, gen int64, done func(*dsv1.DiskSchedule) bool) (*dsv1.DiskSchedule, error) {
	changed, stop := g.waiter.subscribe(disk)
	defer stop()
	for {
		ds, err := g.read(ctx, disk)
		if err != nil {
			return nil, err
		}
		if ds.Generation >= gen && ds.Status.ObservedGeneration >= gen && done(ds) {
			return ds, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// setRequest sets m[name] to size, creating the map; it reports a change.
func setRequest(m *map[string]dsv1.RequestedBytes, name string, size int64) bool {
	if cur, ok := (*m)[name]; ok && int64(cur) == size {
		return false
	}
	if *m == nil {
		*m = map[string]dsv1.RequestedBytes{}
	}
	(*m)[name] = dsv1.RequestedBytes(size)
	return true
}

// restoreRequest puts m[name] back to prev (deleting it when prev is 0),
// unless someone changed it from ours since; it reports a change.
func restoreRequest(m map[string]dsv1.RequestedBytes, name string, ours, prev int64) bool {
	cur, ok := m[name]
	if !ok || int64(cur) != ours {
		return false
	}
	if prev <= 0 {
		delete(m, name)
	} else {
		m[name] = dsv1.RequestedBytes(prev)
	}
	return true
}

// where names a ledger's disk for people: "disk disk-1 of node node-1".
func where(ds *dsv1.DiskSchedule) string {
	return fmt.Sprintf("disk %s of node %s", ds.Spec.Name, ds.Spec.NodeID)
}
