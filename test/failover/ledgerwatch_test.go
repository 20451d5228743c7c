package failover_test

import (
	"context"
	"fmt"
	"sort"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
)

// reservationKey names one reservation: a volume's on one disk's ledger.
type reservationKey struct {
	disk, volume string
}

func (k reservationKey) String() string { return k.volume + "@" + k.disk }

// ledgerWatch follows every version of every DiskSchedule from one
// resourceVersion on, without gaps (a watch that expires is a failure, not
// a relist), and checks each version against the one before:
//
//   - the ledger's invariant (ledger.Violation);
//   - a reservation once scheduled stays in spec and status, and only
//     becomes fulfilled or expired: it never vanishes nor turns rejected;
//   - a reservation becomes fulfilled in the same version that grants the
//     replica taking it over.
type ledgerWatch struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	last map[string]*dsv1.DiskSchedule
	// seen is the latest status of every reservation, kept once the
	// extender removes a spent one from the ledger.
	seen       map[reservationKey]dsv1.ReservationStatus
	versions   int
	violations []string
	err        error
}

// watchLedgers lists the DiskSchedules of namespace and follows them until Stop.
func watchLedgers(ctx context.Context, c client.WithWatch, namespace string) (*ledgerWatch, error) {
	list := &dsv1.DiskScheduleList{}
	if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing the DiskSchedules: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &ledgerWatch{cancel: cancel, done: make(chan struct{}), last: map[string]*dsv1.DiskSchedule{},
		seen: map[reservationKey]dsv1.ReservationStatus{}}
	for i := range list.Items {
		ds := &list.Items[i]
		w.observe(ds, watch.Added)
	}
	go w.follow(ctx, c, namespace, list.ResourceVersion)
	return w, nil
}

func (w *ledgerWatch) follow(ctx context.Context, c client.WithWatch, namespace, rv string) {
	defer close(w.done)
	for ctx.Err() == nil {
		wi, err := c.Watch(ctx, &dsv1.DiskScheduleList{}, &client.ListOptions{
			Namespace: namespace,
			Raw:       &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true},
		})
		if err != nil {
			if ctx.Err() == nil {
				w.fail(fmt.Errorf("watching the DiskSchedules from resourceVersion %s: %w", rv, err))
			}
			return
		}
		for ev := range wi.ResultChan() {
			switch ev.Type {
			case watch.Error:
				if ctx.Err() != nil {
					wi.Stop()
					return // stopped
				}
				err := apierrors.FromObject(ev.Object)
				w.fail(fmt.Errorf("the DiskSchedule watch from resourceVersion %s failed, versions may be missed: %w", rv, err))
				wi.Stop()
				return
			case watch.Bookmark:
				if obj, ok := ev.Object.(client.Object); ok {
					rv = obj.GetResourceVersion()
				}
			default:
				ds, ok := ev.Object.(*dsv1.DiskSchedule)
				if !ok {
					continue
				}
				rv = ds.ResourceVersion
				w.observe(ds, ev.Type)
			}
		}
		wi.Stop()
	}
}

func (w *ledgerWatch) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
}

// observe checks a new version of a ledger against the one before it.
func (w *ledgerWatch) observe(ds *dsv1.DiskSchedule, t watch.EventType) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.versions++
	bad := func(format string, args ...any) {
		w.violations = append(w.violations, fmt.Sprintf("DiskSchedule %s at resourceVersion %s: ", ds.Name, ds.ResourceVersion)+fmt.Sprintf(format, args...))
	}
	prev := w.last[ds.Name]
	if t == watch.Deleted {
		delete(w.last, ds.Name)
		bad("deleted while holding %d bytes", ds.Status.StorageScheduled)
		return
	}
	w.last[ds.Name] = ds
	st := ds.Status
	if w.seen == nil {
		w.seen = map[reservationKey]dsv1.ReservationStatus{}
	}
	for volume, res := range st.Reservations {
		w.seen[reservationKey{disk: ds.Name, volume: volume}] = res
	}
	if v := ledger.Violation(st); v != "" {
		bad("%s", v)
	}
	for volume, res := range st.Reservations {
		if res.State != dsv1.ReservationStateFulfilled {
			continue
		}
		if before, ok := reservationOf(prev, volume); ok && before.State == dsv1.ReservationStateFulfilled {
			continue
		}
		if r, ok := st.Replicas[res.Replica]; !ok || r.State != dsv1.RequestStateScheduled {
			bad("reservation of volume %s became fulfilled by replica %q, which this version does not grant (%+v)", volume, res.Replica, r)
		}
	}
	if prev == nil {
		return
	}
	for volume, before := range prev.Status.Reservations {
		if before.State != dsv1.ReservationStateScheduled {
			continue
		}
		now, ok := st.Reservations[volume]
		switch {
		case !ok:
			bad("the granted reservation of volume %s (pod %s) vanished from the status", volume, before.Pod)
		case now.State != dsv1.ReservationStateScheduled && now.State != dsv1.ReservationStateFulfilled &&
			now.State != dsv1.ReservationStateExpired:
			bad("the granted reservation of volume %s (pod %s) became %s: %s", volume, before.Pod, now.State, now.Message)
		}
		if _, ok := ds.Spec.Reservations[volume]; !ok {
			bad("the granted reservation of volume %s (pod %s) vanished from the spec", volume, before.Pod)
		}
	}
}

// reservationOf returns the status of volume's reservation in ds, if any.
func reservationOf(ds *dsv1.DiskSchedule, volume string) (dsv1.ReservationStatus, bool) {
	if ds == nil {
		return dsv1.ReservationStatus{}, false
	}
	r, ok := ds.Status.Reservations[volume]
	return r, ok
}

// Scheduled returns the reservations granted in the latest versions.
func (w *ledgerWatch) Scheduled() map[reservationKey]dsv1.ReservationStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[reservationKey]dsv1.ReservationStatus{}
	for name, ds := range w.last {
		for volume, res := range ds.Status.Reservations {
			if res.State == dsv1.ReservationStateScheduled {
				out[reservationKey{disk: name, volume: volume}] = res
			}
		}
	}
	return out
}

// Reservation returns the latest status of one reservation, also after it
// was removed from the ledger.
func (w *ledgerWatch) Reservation(k reservationKey) (dsv1.ReservationStatus, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r, ok := w.seen[k]
	return r, ok
}

// Latest returns the latest version of every ledger, by name.
func (w *ledgerWatch) Latest() map[string]*dsv1.DiskSchedule {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]*dsv1.DiskSchedule, len(w.last))
	for k, v := range w.last {
		out[k] = v.DeepCopy()
	}
	return out
}

// Stop ends the watch and returns the versions seen, every violation found,
// and the watch's own failure.
func (w *ledgerWatch) Stop() (versions int, violations []string, err error) {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	violations = append([]string(nil), w.violations...)
	sort.Strings(violations)
	return w.versions, violations, w.err
}
