package requirement

import (
	"context"
	"fmt"
	"sync"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

// MaxBatch bounds how many requests one ledger write carries.
const MaxBatch = 256

// batchWriteTimeout bounds one batch's write: it is not tied to the
// admission of the request that happens to lead the batch.
const batchWriteTimeout = 10 * time.Second

// Batcher is the group commit of requests to one disk's ledger: requests
// that arrive for a disk while a write to its ledger is in flight wait for
// it, then go together in the next write, one merge patch, which the
// DiskSchedule controller decides in one status write. A request to a disk
// with no write in flight is written at once: it never waits for company.
// A batch holds at most MaxBatch requests; the longest a request waits
// before its batch is written is the write in flight ahead of it.
type Batcher struct {
	client  client.Writer
	clock   clock.PassiveClock
	observe func(size int, wait time.Duration)

	mu    sync.Mutex
	disks map[string]*diskQueue
}

// diskQueue is one disk's requests waiting for a write, and whether a
// write is in flight.
type diskQueue struct {
	waiting []*queued
	busy    bool
}

// queued is one request waiting to be written: its merge patch (against
// the version its writer read), and, once written, the version written.
type queued struct {
	patch []byte
	since time.Time
	// lead is closed when the request is to write batch, the next one.
	lead  chan struct{}
	batch []*queued
	// done is closed once the batch holding the request is written.
	done    chan struct{}
	written *dsv1.DiskSchedule
	err     error
}

// NewBatcher returns a Batcher writing with c; observe (when not nil) is
// told each batch's size and how long its first request waited.
func NewBatcher(c client.Writer, clk clock.PassiveClock, observe func(size int, wait time.Duration)) *Batcher {
	return &Batcher{client: c, clock: clk, observe: observe, disks: map[string]*diskQueue{}}
}

// Write writes patch, a JSON merge patch of the spec keys of one request,
// to the named DiskSchedule without the resourceVersion lock, in one write
// with the other requests to the same ledger waiting at that moment. It
// returns the version written (the same for the whole batch). Waiting for
// the write ahead ends with ctx; a batch once taken is written to the end.
func (b *Batcher) Write(ctx context.Context, namespace, name string, patch []byte) (*dsv1.DiskSchedule, error) {
	q := &queued{patch: patch, since: b.clock.Now(), lead: make(chan struct{}), done: make(chan struct{})}
	if b.enqueue(name, q) {
		b.lead(namespace, name, q)
		return q.written, q.err
	}
	select {
	case <-q.done:
		return q.written, q.err
	case <-q.lead:
		b.lead(namespace, name, q)
		return q.written, q.err
	case <-ctx.Done():
		if b.withdraw(name, q) {
			return nil, fmt.Errorf("waiting to write to DiskSchedule %s: %w", name, ctx.Err())
		}
		// Taken into a batch meanwhile, maybe as its leader: see it through.
		select {
		case <-q.done:
		case <-q.lead:
			b.lead(namespace, name, q)
		}
		return q.written, q.err
	}
}

// enqueue queues q for disk and reports whether q is to write at once, as
// a batch of its own: no write to disk's ledger is in flight.
func (b *Batcher) enqueue(disk string, q *queued) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := b.disks[disk]
	if d == nil {
		d = &diskQueue{}
		b.disks[disk] = d
	}
	if d.busy {
		d.waiting = append(d.waiting, q)
		return false
	}
	d.busy = true
	q.batch = []*queued{q}
	return true
}

// withdraw removes q from disk's queue if it still waits there, not yet
// taken into a batch; it reports whether it did.
func (b *Batcher) withdraw(disk string, q *queued) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := b.disks[disk]
	if d == nil {
		return false
	}
	for i, w := range d.waiting {
		if w == q {
			d.waiting = append(d.waiting[:i], d.waiting[i+1:]...)
			return true
		}
	}
	return false
}

// lead writes leader's batch, tells every request in it the outcome, and
// hands the next batch, taken from disk's queue, to its first request.
func (b *Batcher) lead(namespace, disk string, leader *queued) {
	batch := leader.batch
	written, err := b.write(namespace, disk, batch)
	for _, q := range batch {
		q.written, q.err = written, err
		close(q.done)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	d := b.disks[disk]
	if len(d.waiting) == 0 {
		delete(b.disks, disk)
		return
	}
	n := min(len(d.waiting), MaxBatch)
	next := d.waiting[:n:n]
	d.waiting = d.waiting[n:]
	next[0].batch = next
	close(next[0].lead)
}

// write writes batch's patches to disk's ledger as one merge patch.
func (b *Batcher) write(namespace, disk string, batch []*queued) (*dsv1.DiskSchedule, error) {
	if b.observe != nil {
		b.observe(len(batch), b.clock.Since(batch[0].since))
	}
	patch := batch[0].patch
	for _, q := range batch[1:] {
		merged, err := jsonpatch.MergeMergePatches(patch, q.patch)
		if err != nil {
			return nil, fmt.Errorf("joining %d requests to DiskSchedule %s: %w", len(batch), disk, err)
		}
		patch = merged
	}
	ctx, cancel := context.WithTimeout(context.Background(), batchWriteTimeout)
	defer cancel()
	written := &dsv1.DiskSchedule{}
	written.Namespace, written.Name = namespace, disk
	if err := b.client.Patch(ctx, written, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return nil, fmt.Errorf("writing %d requests to DiskSchedule %s: %w", len(batch), disk, err)
	}
	return written, nil
}
