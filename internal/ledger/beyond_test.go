package ledger

import (
	"testing"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

func TestBeyondLonghorn(t *testing.T) {
	const gi = int64(1) << 30
	ds := &dsv1.DiskSchedule{
		Spec: dsv1.DiskScheduleSpec{
			Replicas: map[string]dsv1.RequestedBytes{
				"persisted":     dsv1.RequestedBytes(10 * gi),
				"in-flight":     dsv1.RequestedBytes(20 * gi),
				"new":           dsv1.RequestedBytes(30 * gi),
				"growing":       dsv1.RequestedBytes(50 * gi), // granted 40Gi, asks 50Gi
				"rejected-here": dsv1.RequestedBytes(70 * gi),
			},
			BackingImages: map[string]dsv1.RequestedBytes{"copied": dsv1.RequestedBytes(2 * gi), "copying": dsv1.RequestedBytes(3 * gi)},
			Reservations: map[string]dsv1.DiskScheduleReservation{
				"held":    {Size: 5 * gi, Pod: "ns/a"},
				"waiting": {Size: 6 * gi, Pod: "ns/b"},
				"handed":  {Size: 7 * gi, Pod: "ns/c", Replica: "persisted"},
			},
		},
		Status: dsv1.DiskScheduleStatus{
			Replicas: map[string]dsv1.RequestStatus{
				"persisted":     {State: dsv1.RequestStateScheduled, RequestedSize: 10 * gi, ScheduledSize: 10 * gi},
				"in-flight":     {State: dsv1.RequestStateScheduled, RequestedSize: 20 * gi, ScheduledSize: 20 * gi},
				"growing":       {State: dsv1.RequestStateScheduled, RequestedSize: 40 * gi, ScheduledSize: 40 * gi},
				"rejected-here": {State: dsv1.RequestStateRejected, RequestedSize: 70 * gi},
			},
			BackingImages: map[string]dsv1.RequestStatus{
				"copied":  {State: dsv1.RequestStateScheduled, RequestedSize: 2 * gi, ScheduledSize: 2 * gi},
				"copying": {State: dsv1.RequestStateScheduled, RequestedSize: 3 * gi, ScheduledSize: 3 * gi},
			},
			Reservations: map[string]dsv1.ReservationStatus{
				"held":   {State: dsv1.ReservationStateScheduled, RequestedSize: 5 * gi, ScheduledSize: 5 * gi, Pod: "ns/a"},
				"handed": {State: dsv1.ReservationStateFulfilled, RequestedSize: 7 * gi, Pod: "ns/c", Replica: "persisted"},
			},
		},
	}
	persisted := Owners{
		Replicas:      map[string]bool{"persisted": true, "growing": true},
		BackingImages: map[string]bool{"copied": true},
	}
	got := BeyondLonghorn(ds, persisted)
	want := Beyond{
		Pending:  30*gi + 10*gi + 6*gi, // new, growing's growth, waiting
		Unbacked: 20*gi + 3*gi,         // in-flight, copying
		Reserved: 5 * gi,               // held
	}
	if got != want {
		t.Errorf("BeyondLonghorn = %+v, want %+v", got, want)
	}
	if got := BeyondLonghorn(&dsv1.DiskSchedule{}, Owners{}); got != (Beyond{}) {
		t.Errorf("an empty ledger holds %+v beyond Longhorn, want nothing", got)
	}
}
