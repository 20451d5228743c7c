package ledger

import dsv1 "github.com/longhorn/diskschedule/api/v1beta2"

// Room is the one rule of "free for this pod": the bytes a ledger can grant
// to a new reservation of each pod ("namespace/name"), what it can still
// grant to anyone (Free) plus what its granted reservations already hold
// for that pod, since the pod's new reservations replace its own. The
// extender's filter and its reservation writer read it once per ledger for
// many pods or many writes (RoomOf(ds).For(pod)); it is kept up to date
// while a writer adds reservations to that ledger one after another
// (Reserve), so each one is checked against what the earlier ones left.
// The zero Room has nothing free.
type Room struct {
	// free is Free of the ledger as read, less what Reserve took; it may
	// go below zero when reservations of a pod use what the ledger holds
	// for it.
	free int64
	// held is what granted reservations hold, by pod.
	held map[string]int64
	// heldBy is the pod and bytes of each granted reservation, by volume.
	heldBy map[string]podBytes
}

// podBytes is what one granted reservation holds, and for which pod.
type podBytes struct {
	pod   string
	bytes int64
}

// RoomOf returns the room of ds as read: Free(ds), and what its granted
// reservations hold for each pod.
func RoomOf(ds *dsv1.DiskSchedule) Room {
	r := Room{free: Free(ds)}
	for volume, res := range ds.Spec.Reservations {
		held := heldBy(ds, volume, res)
		if held <= 0 {
			continue
		}
		if r.held == nil {
			r.held, r.heldBy = map[string]int64{}, map[string]podBytes{}
		}
		r.held[res.Pod] = AddSat(r.held[res.Pod], held)
		r.heldBy[volume] = podBytes{pod: res.Pod, bytes: held}
	}
	return r
}

// For returns the bytes a new reservation of pod ("namespace/name") can
// take: Free of the ledger as read and what its granted reservations hold
// for pod, less what Reserve took since, or 0 when that is negative.
func (r Room) For(pod string) int64 {
	return max(AddSat(r.free, r.held[pod]), 0)
}

// Reserve takes size bytes for a new reservation of volume, written over
// the ledger as read: they are no longer free to anyone, and the
// reservation of volume the ledger had granted, which the new one
// replaces, no longer holds bytes for its pod. The Room must be the
// caller's own (RoomOf), as Reserve changes it in place.
func (r *Room) Reserve(volume string, size int64) {
	r.free = AddSat(r.free, -size)
	if h, ok := r.heldBy[volume]; ok {
		r.held[h.pod] -= h.bytes
		delete(r.heldBy, volume)
	}
}
