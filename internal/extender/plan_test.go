package extender

import (
	"maps"
	"slices"
	"testing"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

// planWant is a want of pod ns/<pod> for volume at size.
func planWant(pod, volume string, size int64) want {
	return want{pod: "ns/" + pod, volume: volume, size: size}
}

// reservationsLedger is a 100Gi ledger with scheduled bytes and the given
// reservations in its spec and status.
func reservationsLedger(scheduled int64, spec map[string]dsv1.DiskScheduleReservation, status map[string]dsv1.ReservationStatus) *dsv1.DiskSchedule {
	ds := readyLedger("uuid-1", "disk-1", "node-a", 100*gi, scheduled)
	ds.Spec.Reservations, ds.Status.Reservations = spec, status
	return ds
}

// decided is the ledger's decision in state on a reservation of size for pod ns/<pod>.
func decided(state dsv1.ReservationState, size int64, pod string) dsv1.ReservationStatus {
	st := dsv1.ReservationStatus{State: state, RequestedSize: size, Pod: "ns/" + pod}
	if state == dsv1.ReservationStateScheduled {
		st.ScheduledSize = size
	}
	return st
}

func TestPlanReservations(t *testing.T) {
	for _, tc := range []struct {
		name   string
		wants  []want
		ds     *dsv1.DiskSchedule
		placed map[string]placedReplica
		// wrote and refused are the volumes of the wants written and refused.
		wrote, refused []string
		// drop are the volumes removed from the spec.
		drop []string
		// spec is the reservations the spec holds after the write, by
		// volume: pod and size.
		spec map[string]dsv1.DiskScheduleReservation
	}{
		{
			name:  "every want fits: all written in one write",
			wants: []want{planWant("a", "v1", 30*gi), planWant("b", "v2", 40*gi)},
			ds:    reservationsLedger(0, nil, nil),
			wrote: []string{"v1", "v2"},
			spec:  map[string]dsv1.DiskScheduleReservation{"v1": {Size: 30 * gi, Pod: "ns/a"}, "v2": {Size: 40 * gi, Pod: "ns/b"}},
		},
		{
			name:    "each want counts what the earlier ones took",
			wants:   []want{planWant("a", "v1", 60*gi), planWant("b", "v2", 50*gi), planWant("c", "v3", 40*gi)},
			ds:      reservationsLedger(0, nil, nil),
			wrote:   []string{"v1", "v3"},
			refused: []string{"v2"},
			spec:    map[string]dsv1.DiskScheduleReservation{"v1": {Size: 60 * gi, Pod: "ns/a"}, "v3": {Size: 40 * gi, Pod: "ns/c"}},
		},
		{
			name:   "a volume whose replica is placed on the node needs no reservation",
			wants:  []want{planWant("a", "v1", 30*gi)},
			ds:     reservationsLedger(0, nil, nil),
			placed: map[string]placedReplica{"v1": {name: "v1-r", disk: "uuid-1"}},
		},
		{
			name:  "a reservation the spec holds already is not written again",
			wants: []want{planWant("a", "v1", 30*gi)},
			ds:    reservationsLedger(0, map[string]dsv1.DiskScheduleReservation{"v1": {Size: 30 * gi, Pod: "ns/a"}}, nil),
			spec:  map[string]dsv1.DiskScheduleReservation{"v1": {Size: 30 * gi, Pod: "ns/a"}},
		},
		{
			name: "spent reservations are dropped, granted and pending ones kept",
			ds: reservationsLedger(20*gi,
				map[string]dsv1.DiskScheduleReservation{
					"granted": {Size: 20 * gi, Pod: "ns/a"}, "pending": {Size: 10 * gi, Pod: "ns/b"},
					"expired": {Size: 10 * gi, Pod: "ns/c"}, "rejected": {Size: 10 * gi, Pod: "ns/d"},
					"fulfilled": {Size: 10 * gi, Pod: "ns/e", Replica: "r"},
				},
				map[string]dsv1.ReservationStatus{
					"granted": decided(dsv1.ReservationStateScheduled, 20*gi, "a"),
					"expired": decided(dsv1.ReservationStateExpired, 10*gi, "c"), "rejected": decided(dsv1.ReservationStateRejected, 10*gi, "d"),
					"fulfilled": decided(dsv1.ReservationStateFulfilled, 10*gi, "e"),
				}),
			drop: []string{"expired", "fulfilled", "rejected"},
			spec: map[string]dsv1.DiskScheduleReservation{"granted": {Size: 20 * gi, Pod: "ns/a"}, "pending": {Size: 10 * gi, Pod: "ns/b"}},
		},
		{
			name:  "a spent reservation of the volume is dropped and the new one waits until the ledger drops its decision",
			wants: []want{planWant("a", "v1", 30*gi)},
			ds: reservationsLedger(0, map[string]dsv1.DiskScheduleReservation{"v1": {Size: 30 * gi, Pod: "ns/a"}},
				map[string]dsv1.ReservationStatus{"v1": decided(dsv1.ReservationStateExpired, 30*gi, "a")}),
			drop: []string{"v1"},
			spec: map[string]dsv1.DiskScheduleReservation{},
		},
		{
			name:  "the decision on a reservation dropped earlier still stands: nothing written",
			wants: []want{planWant("a", "v1", 30*gi)},
			ds:    reservationsLedger(0, nil, map[string]dsv1.ReservationStatus{"v1": decided(dsv1.ReservationStateExpired, 30*gi, "a")}),
		},
		{
			name:  "a pod's granted reservation is room for its own reservation of the volume at a new size",
			wants: []want{planWant("a", "v1", 50*gi)},
			ds: reservationsLedger(90*gi, map[string]dsv1.DiskScheduleReservation{"v1": {Size: 40 * gi, Pod: "ns/a"}},
				map[string]dsv1.ReservationStatus{"v1": decided(dsv1.ReservationStateScheduled, 40*gi, "a")}),
			wrote: []string{"v1"},
			spec:  map[string]dsv1.DiskScheduleReservation{"v1": {Size: 50 * gi, Pod: "ns/a"}},
		},
		{
			name:  "another pod's granted reservation is no room",
			wants: []want{planWant("b", "v2", 20*gi)},
			ds: reservationsLedger(90*gi, map[string]dsv1.DiskScheduleReservation{"v1": {Size: 40 * gi, Pod: "ns/a"}},
				map[string]dsv1.ReservationStatus{"v1": decided(dsv1.ReservationStateScheduled, 40*gi, "a")}),
			refused: []string{"v2"},
			spec:    map[string]dsv1.DiskScheduleReservation{"v1": {Size: 40 * gi, Pod: "ns/a"}},
		},
		{
			name:  "what a pod holds counts once for all its wants",
			wants: []want{planWant("a", "v2", 15*gi), planWant("a", "v3", 16*gi)},
			ds: reservationsLedger(90*gi, map[string]dsv1.DiskScheduleReservation{"v1": {Size: 20 * gi, Pod: "ns/a"}},
				map[string]dsv1.ReservationStatus{"v1": decided(dsv1.ReservationStateScheduled, 20*gi, "a")}),
			wrote:   []string{"v2"},
			refused: []string{"v3"},
			spec: map[string]dsv1.DiskScheduleReservation{"v1": {Size: 20 * gi, Pod: "ns/a"},
				"v2": {Size: 15 * gi, Pod: "ns/a"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			read := tc.ds.DeepCopy()
			plan := planReservations(tc.wants, tc.ds, tc.placed)
			volumes := func(idx []int) []string {
				var out []string
				for _, i := range idx {
					out = append(out, tc.wants[i].volume)
				}
				return out
			}
			if got := volumes(plan.wrote); !slices.Equal(got, tc.wrote) {
				t.Errorf("wrote %v, want %v", got, tc.wrote)
			}
			if got := volumes(plan.refused); !slices.Equal(got, tc.refused) {
				t.Errorf("refused %v, want %v", got, tc.refused)
			}
			if !slices.Equal(plan.drop, tc.drop) {
				t.Errorf("dropped %v, want %v", plan.drop, tc.drop)
			}
			if !equalDiskSchedules(tc.ds, read) {
				t.Errorf("planning changed the ledger as read")
			}
			next := tc.ds.DeepCopy()
			changed := plan.apply(next)
			if want := len(tc.wrote) > 0 || len(tc.drop) > 0; changed != want {
				t.Errorf("apply reports a change %v, want %v", changed, want)
			}
			if !maps.Equal(next.Spec.Reservations, tc.spec) {
				t.Errorf("spec after the write %v, want %v", next.Spec.Reservations, tc.spec)
			}
		})
	}
}

// equalDiskSchedules reports whether a and b hold the same reservations in
// spec and status.
func equalDiskSchedules(a, b *dsv1.DiskSchedule) bool {
	return maps.Equal(a.Spec.Reservations, b.Spec.Reservations) && maps.Equal(a.Status.Reservations, b.Status.Reservations)
}
