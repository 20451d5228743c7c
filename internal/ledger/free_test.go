package ledger

import (
	"testing"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

// freeLedger returns a ledger with limit 100Gi, scheduled bytes and the
// given reservations in spec and status.
func freeLedger(scheduled int64, spec map[string]dsv1.DiskScheduleReservation, status map[string]dsv1.ReservationStatus) *dsv1.DiskSchedule {
	return &dsv1.DiskSchedule{
		Spec:   dsv1.DiskScheduleSpec{Reservations: spec},
		Status: dsv1.DiskScheduleStatus{StorageLimit: 100 * Gi, StorageScheduled: scheduled, Reservations: status},
	}
}

// grantedFor is the status of a reservation granted at size for pod.
func grantedFor(size int64, pod string) dsv1.ReservationStatus {
	return dsv1.ReservationStatus{State: dsv1.ReservationStateScheduled, RequestedSize: size, ScheduledSize: size, Pod: pod}
}

// TestRoomFor: a new reservation of a pod can take what the ledger can
// still grant to anyone and what its granted reservations hold for that pod.
func TestRoomFor(t *testing.T) {
	for _, tc := range []struct {
		name string
		ds   *dsv1.DiskSchedule
		pod  string
		want int64
	}{
		{"empty ledger", freeLedger(0, nil, nil), "ns/a", 100 * Gi},
		{"scheduled bytes are taken", freeLedger(30*Gi, nil, nil), "ns/a", 70 * Gi},
		{"the pod's granted reservation is its own",
			freeLedger(40*Gi, map[string]dsv1.DiskScheduleReservation{"v": {Size: 40 * Gi, Pod: "ns/a"}},
				map[string]dsv1.ReservationStatus{"v": grantedFor(40*Gi, "ns/a")}),
			"ns/a", 100 * Gi},
		{"another pod's granted reservation is taken",
			freeLedger(40*Gi, map[string]dsv1.DiskScheduleReservation{"v": {Size: 40 * Gi, Pod: "ns/a"}},
				map[string]dsv1.ReservationStatus{"v": grantedFor(40*Gi, "ns/a")}),
			"ns/b", 60 * Gi},
		{"a pending reservation is taken, even the pod's own",
			freeLedger(0, map[string]dsv1.DiskScheduleReservation{"v": {Size: 40 * Gi, Pod: "ns/a"}}, nil),
			"ns/a", 60 * Gi},
		{"a reservation written again at another size holds nothing until decided",
			freeLedger(40*Gi, map[string]dsv1.DiskScheduleReservation{"v": {Size: 50 * Gi, Pod: "ns/a"}},
				map[string]dsv1.ReservationStatus{"v": grantedFor(40*Gi, "ns/a")}),
			"ns/a", 10 * Gi},
		{"an expired reservation holds nothing",
			freeLedger(0, map[string]dsv1.DiskScheduleReservation{"v": {Size: 40 * Gi, Pod: "ns/a"}},
				map[string]dsv1.ReservationStatus{"v": {State: dsv1.ReservationStateExpired, RequestedSize: 40 * Gi, Pod: "ns/a"}}),
			"ns/a", 100 * Gi},
		{"an overcommitted ledger still gives the pod what it holds",
			freeLedger(130*Gi, map[string]dsv1.DiskScheduleReservation{"v": {Size: 20 * Gi, Pod: "ns/a"}},
				map[string]dsv1.ReservationStatus{"v": grantedFor(20*Gi, "ns/a")}),
			"ns/a", 20 * Gi},
		{"an overcommitted ledger gives others nothing",
			freeLedger(130*Gi, nil, nil), "ns/a", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := RoomOf(tc.ds).For(tc.pod); got != tc.want {
				t.Errorf("RoomOf(ds).For(%s) = %s, want %s", tc.pod, Bytes(got), Bytes(tc.want))
			}
		})
	}
}

// TestRoomReserve: each reservation a writer adds is checked against what
// the earlier ones left, and what a pod holds counts for it once.
func TestRoomReserve(t *testing.T) {
	// 10Gi free; pod a holds 20Gi on volume held-a, pod b 5Gi on held-b.
	ds := freeLedger(90*Gi,
		map[string]dsv1.DiskScheduleReservation{"held-a": {Size: 20 * Gi, Pod: "ns/a"}, "held-b": {Size: 5 * Gi, Pod: "ns/b"}},
		map[string]dsv1.ReservationStatus{"held-a": grantedFor(20*Gi, "ns/a"), "held-b": grantedFor(5*Gi, "ns/b")})
	room := RoomOf(ds)
	type step struct {
		volume, pod string
		size        int64
		// wantBefore is For(pod) before the step.
		wantBefore int64
	}
	for i, s := range []step{
		{"new-a1", "ns/a", 12 * Gi, 30 * Gi}, // the 10Gi free and a's own 20Gi
		{"new-b", "ns/b", 3 * Gi, 3 * Gi},    // a used 2Gi of what was free: b has 5Gi − 2Gi
		{"held-a", "ns/c", 1 * Gi, 0},        // nothing is free for c
		{"new-a2", "ns/a", 1 * Gi, 0},        // c replaced held-a: a's 20Gi no longer count
	} {
		if got := room.For(s.pod); got != s.wantBefore {
			t.Fatalf("step %d: For(%s) = %d, want %d", i, s.pod, got, s.wantBefore)
		}
		room.Reserve(s.volume, s.size)
	}
	// 10Gi were free and 25Gi held; 17Gi are reserved and a's 20Gi gone.
	if got := room.For("ns/b"); got != 0 {
		t.Errorf("after the steps, For(ns/b) = %d, want 0", got)
	}
	if fresh := RoomOf(ds); fresh.For("ns/a") != 30*Gi {
		t.Errorf("Reserve changed another Room of the same ledger: For(ns/a) = %d, want 30Gi", fresh.For("ns/a"))
	}
}
