package ledger

import dsv1 "github.com/longhorn/diskschedule/api/v1beta2"

// Limit returns a disk's ledger limit: (storageMaximum − storageReserved) ×
// overProvisioningPercentage / 100, truncated, never negative, and
// math.MaxInt64 when the quotient does not fit in an int64 (MulDivSat).
func Limit(storageMaximum, storageReserved, overProvisioningPercentage int64) int64 {
	if storageReserved >= storageMaximum || overProvisioningPercentage <= 0 {
		return 0
	}
	// storageMaximum > storageReserved, so the difference is positive and
	// fits in a uint64 even when the int64 subtraction would overflow.
	usable := uint64(storageMaximum) - uint64(storageReserved)
	return mulDiv(usable, uint64(overProvisioningPercentage), 100)
}

// Fits reports whether a disk whose ledger has scheduled bytes granted
// under limit can take growth bytes more: scheduled + growth <= limit
// (rule 3), computed without overflow. Every check of a growth against a
// ledger's limit is this one.
func Fits(scheduled, growth, limit int64) bool {
	return growth <= limit-scheduled
}

// PendingGrowth returns the bytes requested in ds's spec beyond what its
// status has decided: new requests not yet decided and growth of entries not
// yet decided at their new size. A pending replica request that a granted
// reservation will be handed to counts only beyond the reservation's size.
// Requesters count it as taken when they look for free space, so two of them
// do not aim at the same bytes.
func PendingGrowth(ds *dsv1.DiskSchedule) int64 {
	heldFor := map[string]int64{} // replica name -> bytes a granted reservation holds for it
	var pending int64
	for volume, res := range ds.Spec.Reservations {
		st, decided := ds.Status.Reservations[volume]
		if !decided || !reservationDecided(res, st) {
			if _, replicaPending := ds.Spec.Replicas[res.Replica]; res.Replica != "" && replicaPending {
				continue // decided together with its replica and charged once, to the replica
			}
			pending = AddSat(pending, res.Size)
			continue
		}
		if res.Replica != "" && st.State == dsv1.ReservationStateScheduled {
			heldFor[res.Replica] = AddSat(heldFor[res.Replica], st.ScheduledSize)
		}
	}
	growth := func(requested int64, decided dsv1.RequestStatus, ok bool) int64 {
		switch {
		case !ok:
			return requested
		case decided.RequestedSize != requested && requested > decided.ScheduledSize:
			return requested - decided.ScheduledSize
		}
		return 0
	}
	for _, k := range Kinds() {
		decided := *Decisions(&ds.Status, k)
		for name, size := range *Requests(&ds.Spec, k) {
			st, ok := decided[name]
			g := growth(int64(size), st, ok)
			if k == Replica {
				g -= heldFor[name]
			}
			pending = AddSat(pending, max(g, 0))
		}
	}
	return pending
}

// Free returns the bytes ds can still grant: storageLimit − storageScheduled
// − PendingGrowth, or 0 when that is negative.
func Free(ds *dsv1.DiskSchedule) int64 {
	return max(AddSat(ds.Status.StorageLimit, -AddSat(ds.Status.StorageScheduled, PendingGrowth(ds))), 0)
}

// reservationDecided reports whether st is the decision on res as written now.
func reservationDecided(res dsv1.DiskScheduleReservation, st dsv1.ReservationStatus) bool {
	return st.RequestedSize == res.Size && st.Pod == res.Pod
}
