package ledger

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

func TestViolation(t *testing.T) {
	overcommitted := func(s metav1.ConditionStatus) []metav1.Condition {
		return []metav1.Condition{{Type: dsv1.DiskScheduleConditionOvercommitted, Status: s, Reason: dsv1.DiskScheduleReasonAdoptedOverLimit}}
	}
	entries := func(replica, image, reservation int64) dsv1.DiskScheduleStatus {
		return dsv1.DiskScheduleStatus{
			Replicas:      map[string]dsv1.RequestStatus{"r": {State: dsv1.RequestStateScheduled, RequestedSize: replica, ScheduledSize: replica}},
			BackingImages: map[string]dsv1.RequestStatus{"bi": {State: dsv1.RequestStateScheduled, RequestedSize: image, ScheduledSize: image}},
			Reservations: map[string]dsv1.ReservationStatus{
				"v":    {State: dsv1.ReservationStateScheduled, RequestedSize: reservation, ScheduledSize: reservation, Pod: "ns/p"},
				"done": {State: dsv1.ReservationStateFulfilled, RequestedSize: 7 * Gi, Pod: "ns/q", Replica: "r"},
			},
		}
	}
	with := func(st dsv1.DiskScheduleStatus, scheduled, limit int64, conds []metav1.Condition) dsv1.DiskScheduleStatus {
		st.StorageScheduled, st.StorageLimit, st.Conditions = scheduled, limit, conds
		return st
	}
	rejected := entries(60*Gi, 5*Gi, 10*Gi)
	rejected.Replicas["r-big"] = dsv1.RequestStatus{State: dsv1.RequestStateRejected, RequestedSize: 500 * Gi, ScheduledSize: 0, Message: "no room"}
	for _, tc := range []struct {
		name string
		st   dsv1.DiskScheduleStatus
		want string // a part of the violation; "" for none
	}{
		{name: "empty ledger", st: dsv1.DiskScheduleStatus{}},
		{name: "under the limit", st: with(entries(60*Gi, 5*Gi, 10*Gi), 75*Gi, 100*Gi, nil)},
		{name: "exactly at the limit", st: with(entries(60*Gi, 30*Gi, 10*Gi), 100*Gi, 100*Gi, overcommitted(metav1.ConditionFalse))},
		{name: "rejected requests count what they keep", st: with(rejected, 75*Gi, 100*Gi, nil)},
		{name: "over the limit, adopted", st: with(entries(120*Gi, 5*Gi, 0), 125*Gi, 100*Gi, overcommitted(metav1.ConditionTrue))},
		{name: "over the limit without Overcommitted", st: with(entries(120*Gi, 5*Gi, 0), 125*Gi, 100*Gi, nil), want: "over storageLimit"},
		{name: "over the limit, Overcommitted=False", st: with(entries(120*Gi, 5*Gi, 0), 125*Gi, 100*Gi, overcommitted(metav1.ConditionFalse)), want: "over storageLimit"},
		{name: "one byte over", st: with(entries(100*Gi, 0, 1), 100*Gi+1, 100*Gi, nil), want: "over storageLimit"},
		{name: "storageScheduled above the sum", st: with(entries(60*Gi, 5*Gi, 10*Gi), 80*Gi, 100*Gi, nil), want: "not the sum"},
		{name: "storageScheduled below the sum", st: with(entries(60*Gi, 5*Gi, 10*Gi), 70*Gi, 100*Gi, nil), want: "not the sum"},
		{name: "adoption excuses no wrong sum", st: with(entries(120*Gi, 5*Gi, 0), 130*Gi, 100*Gi, overcommitted(metav1.ConditionTrue)), want: "not the sum"},
		{name: "reservation counted", st: with(entries(0, 0, 40*Gi), 0, 100*Gi, nil), want: "not the sum"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Violation(tc.st)
			switch {
			case tc.want == "" && got != "":
				t.Errorf("Violation = %q, want none", got)
			case tc.want != "" && !strings.Contains(got, tc.want):
				t.Errorf("Violation = %q, want one saying %q", got, tc.want)
			}
		})
	}
}
