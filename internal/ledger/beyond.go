package ledger

import dsv1 "github.com/longhorn/diskschedule/api/v1beta2"

// Beyond is what a ledger holds, or is asked for, beyond what Longhorn's own
// accounting counts on the disk (DESIGN §4: short-lived by construction).
// While it is not zero a placement Longhorn's scheduler finds room for may
// be denied; docs/accounting-differences.md says how long each part lasts.
type Beyond struct {
	// Pending is the growth requested and not decided yet (PendingGrowth).
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
	b := Beyond{Pending: PendingGrowth(ds)}
	for _, k := range Kinds() {
		for name, st := range *Decisions(&ds.Status, k) {
			if st.State == dsv1.RequestStateScheduled && !persisted.Has(k, name) {
				b.Unbacked = AddSat(b.Unbacked, st.ScheduledSize)
			}
		}
	}
	for _, st := range ds.Status.Reservations {
		if st.State == dsv1.ReservationStateScheduled {
			b.Reserved = AddSat(b.Reserved, st.ScheduledSize)
		}
	}
	return b
}

// CanEverHold reports whether ds's disk can hold size bytes for the entry
// replica whatever else ends: its limit less what the ledger grants to the
// other replicas and the backing-image copies Longhorn persisted on the disk
// (persisted). Pending requests, grants Longhorn has not persisted and
// reservations end by themselves; what Longhorn persisted does not. A
// volume's growth refused while this holds is worth retrying (DESIGN §4).
func CanEverHold(ds *dsv1.DiskSchedule, persisted Owners, replica string, size int64) bool {
	var others int64
	for _, k := range Kinds() {
		for name, st := range *Decisions(&ds.Status, k) {
			if persisted.Has(k, name) && (k != Replica || name != replica) {
				others = AddSat(others, st.ScheduledSize)
			}
		}
	}
	return Fits(others, size, ds.Status.StorageLimit)
}
