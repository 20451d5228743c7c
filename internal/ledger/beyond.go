package ledger

import dsv1 "github.com/longhorn/diskschedule/api/v1beta2"

// Beyond is what a ledger holds, or is asked for, beyond what Longhorn's own
// accounting counts on the disk (DESIGN §4: short-lived by construction).
// While it is not zero a placement Longhorn's scheduler finds room for may
// be denied; docs/accounting-differences.md says how long each part lasts.
type Beyond struct {
	// Pending is the growth requested and not decided yet.
	Pending int64
	// Unbacked is what is granted to replicas and backing-image copies that
	// Longhorn has not persisted on the disk (yet, or any more).
	Unbacked int64
	// Reserved is what granted reservations of the extender hold.
	Reserved int64
}

// BeyondLonghorn returns what ds holds beyond Longhorn's own accounting,
// given what Longhorn persisted on its disk.
func BeyondLonghorn(ds *dsv1.DiskSchedule, persisted Owners) Beyond {
	var b Beyond
	for name, size := range ds.Spec.Replicas {
		st, ok := ds.Status.Replicas[name]
		b.Pending += pendingGrowth(int64(size), st, ok)
		if ok && st.State == dsv1.RequestStateScheduled && !persisted.Replicas[name] {
			b.Unbacked += st.ScheduledSize
		}
	}
	for name, size := range ds.Spec.BackingImages {
		st, ok := ds.Status.BackingImages[name]
		b.Pending += pendingGrowth(int64(size), st, ok)
		if ok && st.State == dsv1.RequestStateScheduled && !persisted.BackingImages[name] {
			b.Unbacked += st.ScheduledSize
		}
	}
	for name, res := range ds.Spec.Reservations {
		st, ok := ds.Status.Reservations[name]
		if !ok || !reservationDecided(res, st) {
			b.Pending += res.Size
			continue
		}
		if st.State == dsv1.ReservationStateScheduled {
			b.Reserved += st.ScheduledSize
		}
	}
	return b
}

// pendingGrowth is the growth a request of size asks beyond its decision
// st (found tells whether there is one), 0 once decided.
func pendingGrowth(size int64, st dsv1.RequestStatus, found bool) int64 {
	switch {
	case !found:
		return size
	case st.RequestedSize == size:
		return 0
	default:
		return max(size-st.ScheduledSize, 0)
	}
}
