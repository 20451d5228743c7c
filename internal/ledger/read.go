package ledger

import (
	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

// Decision is the ledger's answer to one request, as a requester reads it
// from a DiskSchedule. Every package that asks "is my request granted?"
// reads it here.
type Decision int

const (
	// Missing: the spec holds no request of that name and size.
	Missing Decision = iota
	// Pending: the request is written and not decided at its size yet.
	Pending
	// Granted: the ledger granted exactly the requested size.
	Granted
	// Rejected: the ledger rejected the request; the message says why.
	Rejected
)

// String returns the decision's name, for logs.
func (d Decision) String() string {
	switch d {
	case Pending:
		return "pending"
	case Granted:
		return "granted"
	case Rejected:
		return "rejected"
	}
	return "missing"
}

// DecisionOf returns ds's decision on the request of size bytes for the
// entry name of kind k, and the ledger's message when it rejected it. A nil
// ds is Missing.
func DecisionOf(ds *dsv1.DiskSchedule, k Kind, name string, size int64) (Decision, string) {
	if ds == nil {
		return Missing, ""
	}
	return decisionOf(*Requests(&ds.Spec, k), *Decisions(&ds.Status, k), name, size)
}

func decisionOf(spec map[string]dsv1.RequestedBytes, status map[string]dsv1.RequestStatus, name string, size int64) (Decision, string) {
	requested, ok := spec[name]
	if !ok || int64(requested) != size {
		return Missing, ""
	}
	st, decided := status[name]
	if !decided || st.RequestedSize != size {
		return Pending, ""
	}
	if st.State == dsv1.RequestStateScheduled && st.ScheduledSize == size {
		return Granted, ""
	}
	return Rejected, st.Message
}

// heldBy returns the bytes the reservation of volume, res as written now,
// holds: its scheduled size while granted.
func heldBy(ds *dsv1.DiskSchedule, volume string, res dsv1.DiskScheduleReservation) int64 {
	if st, ok := ds.Status.Reservations[volume]; ok && reservationDecided(res, st) && st.State == dsv1.ReservationStateScheduled {
		return st.ScheduledSize
	}
	return 0
}

// PendingCount returns how many requests of ds's spec are not decided at
// their current size.
func PendingCount(ds *dsv1.DiskSchedule) int {
	n := 0
	for _, k := range Kinds() {
		decided := *Decisions(&ds.Status, k)
		for name, size := range *Requests(&ds.Spec, k) {
			if st, ok := decided[name]; !ok || st.RequestedSize != int64(size) {
				n++
			}
		}
	}
	for name, res := range ds.Spec.Reservations {
		if st, ok := ds.Status.Reservations[name]; !ok || !reservationDecided(res, st) {
			n++
		}
	}
	return n
}

// ReservationOf returns volume's reservation as ds's spec writes it and the
// ledger's decision on it as written now: state is "" while the reservation
// is pending (not decided, or decided at another size or for another pod).
// ok is false when the spec has no reservation for volume.
func ReservationOf(ds *dsv1.DiskSchedule, volume string) (res dsv1.DiskScheduleReservation, state dsv1.ReservationState, ok bool) {
	res, ok = ds.Spec.Reservations[volume]
	if !ok {
		return res, "", false
	}
	if st, decided := ds.Status.Reservations[volume]; decided && reservationDecided(res, st) {
		return res, st.State, true
	}
	return res, "", true
}
