package extender

import (
	"maps"
	"slices"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
)

// reservationPlan is one write of a disk's reservations, as
// planReservations decides it from the ledger as read: the spec keys it
// removes and sets, and what becomes of each want.
type reservationPlan struct {
	// drop are the volumes whose reservations the ledger is done with
	// (fulfilled, expired, or rejected as written), removed from the spec
	// so its bounded map keeps room.
	drop []string
	// set are the reservations written, in the order of the wants.
	set []setReservation
	// wrote, present and refused are indexes in the wants: the
	// reservations written now, those the spec holds already as wanted,
	// and those the ledger has no room for, which are not written.
	wrote, present, refused []int
}

// setReservation is one spec key a reservationPlan writes.
type setReservation struct {
	volume string
	res    dsv1.DiskScheduleReservation
}

// planReservations plans the write of wants, in their order, to ds, the
// ledger of their disk as read: each reservation is written unless the
// volume's replica is already placed on the node (placed: its request, not
// a reservation, holds the space), the spec already holds it, the ledger
// still shows its decision on an earlier reservation of the volume it has
// not dropped, or the ledger has no room left for it (ledger.Room, counting
// the reservations written before it); the last are refused. It is pure:
// ds is not changed.
func planReservations(wants []want, ds *dsv1.DiskSchedule, placed map[string]placedReplica) reservationPlan {
	var plan reservationPlan
	next := ds.DeepCopy()
	for _, volume := range slices.Sorted(maps.Keys(next.Spec.Reservations)) {
		if _, state, _ := ledger.ReservationOf(next, volume); state != "" && state != dsv1.ReservationStateScheduled {
			delete(next.Spec.Reservations, volume)
			plan.drop = append(plan.drop, volume)
		}
	}
	room := ledger.RoomOf(next)
	for i, w := range wants {
		if _, ok := placed[w.volume]; ok {
			continue
		}
		if res, _, ok := ledger.ReservationOf(next, w.volume); ok && res.Pod == w.pod && res.Size == w.size {
			plan.present = append(plan.present, i) // written already
			continue
		}
		_, inSpec := next.Spec.Reservations[w.volume]
		if _, decided := next.Status.Reservations[w.volume]; !inSpec && decided {
			// The ledger has not dropped its decision on an earlier
			// reservation of the volume (dropped above): written now, the
			// new one would be read as that one. The ledger's next status
			// wakes this disk again.
			continue
		}
		if w.size > room.For(w.pod) {
			plan.refused = append(plan.refused, i)
			continue
		}
		res := dsv1.DiskScheduleReservation{Size: w.size, Pod: w.pod}
		if next.Spec.Reservations == nil {
			next.Spec.Reservations = map[string]dsv1.DiskScheduleReservation{}
		}
		next.Spec.Reservations[w.volume] = res
		room.Reserve(w.volume, w.size)
		plan.set = append(plan.set, setReservation{volume: w.volume, res: res})
		plan.wrote = append(plan.wrote, i)
	}
	return plan
}

// apply makes the plan's edits to ds, a copy of the ledger it was planned
// from, and reports whether it changed anything: the change that
// ledgerclient.Merge writes.
func (p reservationPlan) apply(ds *dsv1.DiskSchedule) bool {
	for _, volume := range p.drop {
		delete(ds.Spec.Reservations, volume)
	}
	for _, s := range p.set {
		if ds.Spec.Reservations == nil {
			ds.Spec.Reservations = map[string]dsv1.DiskScheduleReservation{}
		}
		ds.Spec.Reservations[s.volume] = s.res
	}
	return len(p.drop) > 0 || len(p.set) > 0
}
