package failover_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

// TestLedgerWatchChecks feeds the failover test's ledger checks a version
// before and after, and expects a violation exactly when the rules are broken.
func TestLedgerWatchChecks(t *testing.T) {
	const size = 100
	reserved := func(state dsv1.ReservationState, held int64, replica string) map[string]dsv1.ReservationStatus {
		return map[string]dsv1.ReservationStatus{"vol": {State: state, RequestedSize: size, ScheduledSize: held, Pod: "ns/app", Replica: replica}}
	}
	granted := map[string]dsv1.RequestStatus{"vol-r": {State: dsv1.RequestStateScheduled, RequestedSize: size, ScheduledSize: size}}
	ledger := func(spec bool, replicas map[string]dsv1.RequestStatus, reservations map[string]dsv1.ReservationStatus, scheduled, limit int64) *dsv1.DiskSchedule {
		ds := &dsv1.DiskSchedule{ObjectMeta: metav1.ObjectMeta{Name: "disk", ResourceVersion: "2"}}
		if spec {
			ds.Spec.Reservations = map[string]dsv1.DiskScheduleReservation{"vol": {Size: size, Pod: "ns/app", Replica: "vol-r"}}
		}
		ds.Status = dsv1.DiskScheduleStatus{Replicas: replicas, Reservations: reservations, StorageScheduled: scheduled, StorageLimit: limit}
		return ds
	}
	before := ledger(true, nil, reserved(dsv1.ReservationStateScheduled, size, ""), size, 400)
	for _, tt := range []struct {
		name  string
		after *dsv1.DiskSchedule
		want  string
	}{
		{"still scheduled", ledger(true, nil, reserved(dsv1.ReservationStateScheduled, size, ""), size, 400), ""},
		{"handed over in the same version", ledger(true, granted, reserved(dsv1.ReservationStateFulfilled, 0, "vol-r"), size, 400), ""},
		{"expired", ledger(true, nil, reserved(dsv1.ReservationStateExpired, 0, ""), 0, 400), ""},
		{"fulfilled but the replica not granted", ledger(true, nil, reserved(dsv1.ReservationStateFulfilled, 0, "vol-r"), 0, 400), "does not grant"},
		{"vanished from the status", ledger(true, nil, nil, 0, 400), "vanished from the status"},
		{"vanished from the spec", ledger(false, nil, reserved(dsv1.ReservationStateScheduled, size, ""), size, 400), "vanished from the spec"},
		{"turned rejected", ledger(true, nil, reserved(dsv1.ReservationStateRejected, 0, ""), 0, 400), "became rejected"},
		{"over the limit", ledger(true, nil, reserved(dsv1.ReservationStateScheduled, size, ""), size, size-1), "over storageLimit"},
		{"storageScheduled is not the sum", ledger(true, nil, reserved(dsv1.ReservationStateScheduled, size, ""), 2*size, 400), "not the sum"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := &ledgerWatch{last: map[string]*dsv1.DiskSchedule{}}
			w.observe(before.DeepCopy(), watch.Added)
			w.observe(tt.after, watch.Modified)
			got := strings.Join(w.violations, "\n")
			switch {
			case tt.want == "" && got != "":
				t.Errorf("unexpected violations:\n%s", got)
			case tt.want != "" && !strings.Contains(got, tt.want):
				t.Errorf("violations %q, want one saying %q", got, tt.want)
			}
		})
	}
	w := &ledgerWatch{last: map[string]*dsv1.DiskSchedule{}}
	w.observe(before.DeepCopy(), watch.Added)
	w.observe(before.DeepCopy(), watch.Deleted)
	if len(w.violations) != 1 || !strings.Contains(w.violations[0], "deleted while holding") {
		t.Errorf("deleting a ledger that grants space: violations %q", w.violations)
	}
}
