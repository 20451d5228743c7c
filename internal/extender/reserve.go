package extender

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/ledgerclient"
)

// writeWorkers write reservations to distinct disks in parallel.
const writeWorkers = 4

// writeQueue holds the disk UUIDs whose reservations are to be written.
type writeQueue = workqueue.TypedRateLimitingInterface[string]

// ErrRefused says a ledger has no room left for a reservation, or decided
// against it: the pod is to be scheduled again.
var ErrRefused = errors.New("reservation refused")

// runWriters writes the reservations of the disks in queue until it shuts down.
func (e *Extender) runWriters(ctx context.Context, queue writeQueue) {
	for range writeWorkers {
		go func() {
			for {
				disk, shutdown := queue.Get()
				if shutdown {
					return
				}
				if _, err := e.writeDisk(ctx, disk, nil); err != nil && ctx.Err() == nil {
					ctrl.LoggerFrom(ctx).Error(err, "Writing reservations", "diskSchedule", disk)
					queue.AddRateLimited(disk)
				} else {
					queue.Forget(disk)
				}
				queue.Done(disk)
			}
		}()
	}
}

// want is one reservation an entry waits for on a disk.
type want struct {
	entry *inflight
	// pod is the entry's pod as reservations name it (inflight.key).
	pod    string
	volume string
	size   int64
}

// writeDisk writes, in one merge patch, the reservations the entries in
// flight wait for on disk, and drops from its spec the reservations the
// ledger is done with, as planReservations plans them. binders are the
// pods whose Reserve this write is (none for the background writers): their
// reservations are written with the others'. A reservation the ledger has
// no room for is not written: its entry's claim ends and, when it is a
// binder's, that binder's result is ErrRefused. A volume whose replica
// Longhorn already placed on the node needs no reservation. It returns, by
// binder, the reservations the disk's ledger holds as they were wanted,
// written now or before, for the ledger to decide, or the binder's error;
// an error of the write itself is every binder's.
func (e *Extender) writeDisk(ctx context.Context, disk string, binders sets.Set[types.UID]) (map[types.UID]commitResult, error) {
	wants, ds := e.flight.wanted(disk, binders)
	if len(wants) == 0 {
		return nil, nil
	}
	if ds == nil {
		return nil, fmt.Errorf("no DiskSchedule for disk %s yet", disk)
	}
	placed, err := e.placedOnNode(ctx, wants, ds.Spec.NodeID)
	if err != nil {
		return nil, err
	}
	plan := planReservations(wants, ds, placed)
	// Only the extender writes reservations, whole keys at a time: a merge
	// patch without the resourceVersion lock never conflicts with the other
	// writers or the controller (ledgerclient.Merge). The informer's event
	// of the write settles the entries it shows.
	if _, err := ledgerclient.Merge(ctx, e.opts.Client, ds, plan.apply); err != nil {
		return nil, err
	}
	results := make(map[types.UID]commitResult, len(binders))
	for _, i := range slices.Concat(plan.wrote, plan.present) {
		if w := wants[i]; binders.Has(w.entry.uid) {
			r := results[w.entry.uid]
			r.held = append(r.held, Reservation{disk: disk, volume: w.volume, pod: w.pod, size: w.size})
			results[w.entry.uid] = r
		}
	}
	refused := map[types.UID][]string{}
	for _, w := range e.flight.wrote(disk, wants, plan, placed, binders) {
		refused[w.entry.uid] = append(refused[w.entry.uid], fmt.Sprintf("volume %s needs %s", w.volume, ledger.Bytes(w.size)))
	}
	for uid, mine := range refused {
		results[uid] = commitResult{err: fmt.Errorf("%w: %s on disk %s of node %s, which has %s free", ErrRefused, strings.Join(mine, ", "),
			ds.Spec.Name, ds.Spec.NodeID, ledger.Bytes(ledger.Free(ds)))}
	}
	return results, nil
}

// commitResult is one binder's part of a write of a disk's reservations:
// the reservations the ledger holds for it, or why not.
type commitResult struct {
	held []Reservation
	err  error
}

// commitTimeout bounds one group write of a disk's reservations.
const commitTimeout = 30 * time.Second

// commits coalesces the writes of the pods being bound onto one disk (a
// group commit): the first binder of an idle disk writes at once; the
// binders that come while a write is in flight wait for it to end, and the
// next write carries all of them in one merge patch. Reservations of many
// pods bound at once onto a disk cost one write each round, not one each.
type commits struct {
	mu    sync.Mutex
	disks map[string]*commitGroup
}

// commitGroup is one disk's binders waiting for the next write.
type commitGroup struct {
	next map[types.UID]chan commitResult
}

// commitDisk writes the reservations of the pod with uid on disk, with
// those of every other pod being bound onto it meanwhile, and returns the
// pod's part of the write.
func (e *Extender) commitDisk(ctx context.Context, disk string, uid types.UID) ([]Reservation, error) {
	done := make(chan commitResult, 1)
	c := &e.commits
	c.mu.Lock()
	if c.disks == nil {
		c.disks = map[string]*commitGroup{}
	}
	g, running := c.disks[disk]
	if !running {
		g = &commitGroup{next: map[types.UID]chan commitResult{}}
		c.disks[disk] = g
	}
	g.next[uid] = done
	c.mu.Unlock()
	if !running {
		go e.runCommits(disk, g)
	}
	select {
	case r := <-done:
		return r.held, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the write of disk %s: %w", disk, ctx.Err())
	}
}

// runCommits writes disk's reservations for the binders of g, round after
// round, until no binder waits.
func (e *Extender) runCommits(disk string, g *commitGroup) {
	c := &e.commits
	for {
		c.mu.Lock()
		batch := g.next
		if len(batch) == 0 {
			delete(c.disks, disk)
			c.mu.Unlock()
			return
		}
		g.next = map[types.UID]chan commitResult{}
		c.mu.Unlock()

		binders := sets.KeySet(batch)
		ctx, cancel := context.WithTimeout(e.background, commitTimeout)
		results, err := e.writeDisk(ctx, disk, binders)
		cancel()
		e.opts.Metrics.ReservationBatch.Observe(float64(len(batch)))
		for uid, done := range batch {
			if err != nil {
				done <- commitResult{err: err}
			} else {
				done <- results[uid]
			}
		}
	}
}
