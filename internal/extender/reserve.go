package extender

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
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
				if _, err := e.writeDisk(ctx, disk, ""); err != nil && ctx.Err() == nil {
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
// ledger is done with, as planReservations plans them. A reservation the
// ledger has no room for is not written: its entry's claim ends and, when
// onlyPod (a pod's UID) is set and the reservation is that pod's,
// ErrRefused is returned. A volume whose replica Longhorn already placed
// on the node needs no reservation. It returns onlyPod's reservations that
// the disk's ledger holds as they were wanted, written now or before, for
// the ledger to decide.
func (e *Extender) writeDisk(ctx context.Context, disk string, onlyPod types.UID) ([]Reservation, error) {
	wants, ds := e.flight.wanted(disk, onlyPod)
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
	var held []Reservation
	if onlyPod != "" {
		for _, i := range slices.Concat(plan.wrote, plan.present) {
			if w := wants[i]; w.entry.uid == onlyPod {
				held = append(held, Reservation{disk: disk, volume: w.volume, pod: w.pod, size: w.size})
			}
		}
	}
	var mine []string
	for _, w := range e.flight.wrote(disk, wants, plan, placed, onlyPod) {
		mine = append(mine, fmt.Sprintf("volume %s needs %s", w.volume, ledger.Bytes(w.size)))
	}
	if len(mine) > 0 {
		return nil, fmt.Errorf("%w: %s on disk %s of node %s, which has %s free", ErrRefused, strings.Join(mine, ", "),
			ds.Spec.Name, ds.Spec.NodeID, ledger.Bytes(ledger.Free(ds)))
	}
	return held, nil
}
