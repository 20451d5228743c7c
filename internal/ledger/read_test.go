package ledger

import (
	"testing"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

// TestRoomHeldForPod: only granted reservations, decided as written now,
// hold bytes for their pod. The ledger has nothing free for anyone, so what
// a pod's new reservation can take is what it holds.
func TestRoomHeldForPod(t *testing.T) {
	ds := &dsv1.DiskSchedule{
		Spec: dsv1.DiskScheduleSpec{Reservations: map[string]dsv1.DiskScheduleReservation{
			"granted-a":   {Size: 10 * Gi, Pod: "ns/a"},
			"granted-a2":  {Size: 5 * Gi, Pod: "ns/a"},
			"granted-b":   {Size: 20 * Gi, Pod: "ns/b"},
			"pending-c":   {Size: 30 * Gi, Pod: "ns/c"},
			"rewritten-d": {Size: 50 * Gi, Pod: "ns/d"}, // decided at 40Gi, written again at 50Gi
			"expired-e":   {Size: 60 * Gi, Pod: "ns/e"},
			"other-pod-f": {Size: 70 * Gi, Pod: "ns/f2"}, // decided for ns/f
		}},
		Status: dsv1.DiskScheduleStatus{Reservations: map[string]dsv1.ReservationStatus{
			"granted-a":   {State: dsv1.ReservationStateScheduled, RequestedSize: 10 * Gi, ScheduledSize: 10 * Gi, Pod: "ns/a"},
			"granted-a2":  {State: dsv1.ReservationStateScheduled, RequestedSize: 5 * Gi, ScheduledSize: 5 * Gi, Pod: "ns/a"},
			"granted-b":   {State: dsv1.ReservationStateScheduled, RequestedSize: 20 * Gi, ScheduledSize: 20 * Gi, Pod: "ns/b"},
			"rewritten-d": {State: dsv1.ReservationStateScheduled, RequestedSize: 40 * Gi, ScheduledSize: 40 * Gi, Pod: "ns/d"},
			"expired-e":   {State: dsv1.ReservationStateExpired, RequestedSize: 60 * Gi, Pod: "ns/e"},
			"other-pod-f": {State: dsv1.ReservationStateScheduled, RequestedSize: 70 * Gi, ScheduledSize: 70 * Gi, Pod: "ns/f"},
		}},
	}
	if free := Free(ds); free != 0 {
		t.Fatalf("Free = %s, want nothing free", Bytes(free))
	}
	room := RoomOf(ds)
	want := map[string]int64{"ns/a": 15 * Gi, "ns/b": 20 * Gi}
	for _, pod := range []string{"ns/a", "ns/b", "ns/c", "ns/d", "ns/e", "ns/f", "ns/f2", "ns/none"} {
		if got := room.For(pod); got != want[pod] {
			t.Errorf("pod %s: holds %s, want %s", pod, Bytes(got), Bytes(want[pod]))
		}
	}
}
