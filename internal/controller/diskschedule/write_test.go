package diskschedule

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/controller/config"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/metrics"
	"github.com/longhorn/diskschedule/internal/scheme"
)

// TestWriteStatusRefusesViolations feeds the status writer plans whose
// status breaks the ledger's invariant: none is written, each is reported
// as a Warning Event on the DiskSchedule and counted; a status that keeps
// the invariant, adopted allocations over the limit included, is written.
func TestWriteStatusRefusesViolations(t *testing.T) {
	const gi = int64(1) << 30
	granted := func(size int64) dsv1.RequestStatus {
		return dsv1.RequestStatus{State: dsv1.RequestStateScheduled, RequestedSize: size, ScheduledSize: size}
	}
	over := func(overcommitted metav1.ConditionStatus) dsv1.DiskScheduleStatus {
		return dsv1.DiskScheduleStatus{
			StorageScheduled: 120 * gi, StorageLimit: 100 * gi,
			Replicas: map[string]dsv1.RequestStatus{"r-1": granted(120 * gi)},
			Conditions: []metav1.Condition{{Type: dsv1.DiskScheduleConditionOvercommitted, Status: overcommitted,
				Reason: dsv1.DiskScheduleReasonAdoptedOverLimit, Message: "adopted", LastTransitionTime: metav1.Now()}},
		}
	}
	wrongSum := dsv1.DiskScheduleStatus{StorageScheduled: 10 * gi, StorageLimit: 100 * gi,
		Replicas: map[string]dsv1.RequestStatus{"r-1": granted(20 * gi)}}
	for _, tc := range []struct {
		name      string
		status    dsv1.DiskScheduleStatus
		violation string // a part of the Event's message; "" when the status is written
	}{
		{"over the limit without Overcommitted", over(metav1.ConditionFalse), "over storageLimit"},
		{"storageScheduled not the sum of its entries", wrongSum, "not the sum"},
		{"adopted over the limit", over(metav1.ConditionTrue), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := scheme.New()
			if err != nil {
				t.Fatal(err)
			}
			ds := &dsv1.DiskSchedule{
				ObjectMeta: metav1.ObjectMeta{Namespace: "longhorn-system", Name: "disk-uuid-1"},
				Spec: dsv1.DiskScheduleSpec{Name: "disk-1", NodeID: "node-1",
					Replicas: map[string]dsv1.RequestedBytes{"r-1": dsv1.RequestedBytes(tc.status.Replicas["r-1"].RequestedSize)}},
			}
			writes := 0
			c := fake.NewClientBuilder().WithScheme(s).WithObjects(ds).WithStatusSubresource(ds).
				WithInterceptorFuncs(interceptor.Funcs{
					SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
						writes++
						return c.SubResource(sub).Update(ctx, obj, opts...)
					},
				}).Build()
			recorder := events.NewFakeRecorder(10)
			m := metrics.NewLedger(prometheus.NewRegistry())
			r := NewReconciler(c, recorder, clocktesting.NewFakePassiveClock(metav1.Now().Time), m, 1, config.NewStore())

			read := &dsv1.DiskSchedule{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(ds), read); err != nil {
				t.Fatal(err)
			}
			written, conflict, err := r.writeStatus(context.Background(), statusPlan{ledger: read, status: tc.status, outcome: ledger.Outcome{Granted: 1, Adopted: 1}})
			if err != nil || conflict {
				t.Fatalf("writeStatus: conflict %v, error %v", conflict, err)
			}
			violations := testutil.ToFloat64(m.InvariantViolations.WithLabelValues("node-1", "disk-1"))
			stored := &dsv1.DiskSchedule{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(ds), stored); err != nil {
				t.Fatal(err)
			}
			if tc.violation == "" {
				if !written || writes != 1 || stored.Status.StorageScheduled != tc.status.StorageScheduled {
					t.Errorf("a status that keeps the invariant: written %v, %d writes, stored storageScheduled %d; want it written once",
						written, writes, stored.Status.StorageScheduled)
				}
				if violations != 0 {
					t.Errorf("invariant violations = %v, want 0", violations)
				}
				return
			}
			if written || writes != 0 || stored.Status.StorageScheduled != 0 {
				t.Errorf("a status that breaks the invariant: written %v, %d writes, stored storageScheduled %d; want no write",
					written, writes, stored.Status.StorageScheduled)
			}
			if violations != 1 {
				t.Errorf("invariant violations = %v, want 1", violations)
			}
			select {
			case e := <-recorder.Events:
				if !strings.HasPrefix(e, "Warning "+ReasonInvariantViolation+" ") || !strings.Contains(e, tc.violation) {
					t.Errorf("Event %q, want a Warning %s saying %q", e, ReasonInvariantViolation, tc.violation)
				}
			default:
				t.Errorf("no Event recorded for the violation")
			}
		})
	}
}
