package ledger

import (
	"math"
	"math/big"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

// near63 is a size near 2^63: two of them do not fit in an int64.
const near63 int64 = math.MaxInt64 - 1000

func TestAddSat(t *testing.T) {
	for _, tc := range []struct {
		a, b, want int64
	}{
		{1, 2, 3},
		{near63, 1000, math.MaxInt64},
		{near63, 1001, math.MaxInt64},
		{near63, near63, math.MaxInt64},
		{math.MaxInt64, math.MaxInt64, math.MaxInt64},
		{math.MaxInt64, -1, math.MaxInt64 - 1},
		{-near63, -near63, math.MinInt64},
		{math.MinInt64, -1, math.MinInt64},
		{math.MinInt64, math.MaxInt64, -1},
		{0, math.MinInt64, math.MinInt64},
	} {
		if got := AddSat(tc.a, tc.b); got != tc.want {
			t.Errorf("AddSat(%d, %d) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := AddSat(tc.b, tc.a); got != tc.want {
			t.Errorf("AddSat(%d, %d) = %d, want %d", tc.b, tc.a, got, tc.want)
		}
	}
	if got := SumSat(near63, near63, -near63); got != math.MaxInt64-near63 {
		t.Errorf("SumSat saturates once and goes on from there: got %d, want %d", got, math.MaxInt64-near63)
	}
	if got := SumSat(); got != 0 {
		t.Errorf("SumSat() = %d, want 0", got)
	}
}

func TestMulDivSat(t *testing.T) {
	exact := func(a, b, c int64) int64 {
		q := new(big.Int).Mul(big.NewInt(a), big.NewInt(b))
		q.Quo(q, big.NewInt(c))
		if !q.IsInt64() {
			return math.MaxInt64
		}
		return q.Int64()
	}
	for _, tc := range [][3]int64{
		{near63, 8, near63}, {near63, 1, near63}, {math.MaxInt64, 99, 100}, {math.MaxInt64, 100, 100},
		{math.MaxInt64, 101, 100}, {near63, near63, 1}, {near63, near63, math.MaxInt64}, {1, 1, 2}, {7, 3, 2},
	} {
		if got, want := MulDivSat(tc[0], tc[1], tc[2]), exact(tc[0], tc[1], tc[2]); got != want {
			t.Errorf("MulDivSat(%d, %d, %d) = %d, want %d", tc[0], tc[1], tc[2], got, want)
		}
	}
	for _, tc := range [][3]int64{{-1, 5, 5}, {5, -1, 5}, {5, 5, 0}, {5, 5, -1}, {0, 5, 5}} {
		if got := MulDivSat(tc[0], tc[1], tc[2]); got != 0 {
			t.Errorf("MulDivSat(%d, %d, %d) = %d, want 0", tc[0], tc[1], tc[2], got)
		}
	}
}

// TestSumsNear2To63 holds every sum of sizes in the ledger to saturate
// rather than wrap around when the sizes add up past an int64.
func TestSumsNear2To63(t *testing.T) {
	huge := func(n int64) dsv1.RequestStatus {
		return dsv1.RequestStatus{State: dsv1.RequestStateScheduled, RequestedSize: n, ScheduledSize: n}
	}
	ds := &dsv1.DiskSchedule{
		Spec: dsv1.DiskScheduleSpec{
			Replicas:      map[string]dsv1.RequestedBytes{"a": rb(near63), "b": rb(near63), "new": rb(near63)},
			BackingImages: map[string]dsv1.RequestedBytes{"bi": rb(near63)},
			Reservations:  map[string]dsv1.DiskScheduleReservation{"v": {Size: near63, Pod: "ns/p"}, "w": {Size: near63, Pod: "ns/p"}},
		},
		Status: dsv1.DiskScheduleStatus{
			StorageLimit:     math.MaxInt64,
			StorageScheduled: math.MaxInt64,
			Replicas:         map[string]dsv1.RequestStatus{"a": huge(near63), "b": huge(near63)},
			BackingImages:    map[string]dsv1.RequestStatus{"bi": huge(near63)},
			Reservations: map[string]dsv1.ReservationStatus{
				"v": {State: dsv1.ReservationStateScheduled, RequestedSize: near63, ScheduledSize: near63, Pod: "ns/p"},
				"w": {State: dsv1.ReservationStateScheduled, RequestedSize: near63, ScheduledSize: near63, Pod: "ns/p"},
			},
			Conditions: []metav1.Condition{{Type: dsv1.DiskScheduleConditionOvercommitted, Status: metav1.ConditionTrue}},
		},
	}
	if got := scheduledSum(ds.Status); got != math.MaxInt64 {
		t.Errorf("scheduledSum = %d, want it saturated at %d", got, int64(math.MaxInt64))
	}
	if v := Violation(ds.Status); v != "" {
		t.Errorf("Violation of a saturated ledger that says so: %q", v)
	}
	if got := PendingGrowth(ds); got != near63 {
		t.Errorf("PendingGrowth = %d, want %d", got, near63)
	}
	ds.Spec.Replicas["other"] = rb(near63)
	if got := PendingGrowth(ds); got != math.MaxInt64 {
		t.Errorf("PendingGrowth of two huge requests = %d, want it saturated", got)
	}
	if got := Free(ds); got != 0 {
		t.Errorf("Free = %d, want 0: a wrapped sum would make a full disk look empty", got)
	}
	ds.Status.StorageLimit, ds.Status.StorageScheduled = 0, math.MaxInt64
	if got := Free(ds); got != 0 {
		t.Errorf("Free with limit 0 = %d, want 0", got)
	}
	room := RoomOf(ds)
	if got := room.For("ns/p"); got != math.MaxInt64 {
		t.Errorf("Room.For = %d, want the saturated hold of two huge reservations", got)
	}
	room.Reserve("x", near63)
	room.Reserve("y", near63)
	if got := room.For("ns/q"); got != 0 {
		t.Errorf("Room.For another pod after two huge reservations = %d, want 0", got)
	}
	b := BeyondLonghorn(ds, Owners{})
	if b.Unbacked != math.MaxInt64 || b.Reserved != math.MaxInt64 || b.Pending != math.MaxInt64 {
		t.Errorf("BeyondLonghorn = %+v, want every part saturated", b)
	}
	persisted := Owners{Replicas: map[string]bool{"a": true, "b": true}, BackingImages: map[string]bool{"bi": true}}
	if CanEverHold(ds, persisted, "new", 1) {
		t.Errorf("CanEverHold: a disk whose persisted entries add up past 2^63 holds 1 byte more")
	}
}

// TestDecideNear2To63 decides requests whose sizes add up past an int64:
// the decision saturates, grants nothing that does not fit, and keeps the
// invariant.
func TestDecideNear2To63(t *testing.T) {
	t.Run("adopted entries past 2^63 refuse growth", func(t *testing.T) {
		in := Input{
			Spec:      dsv1.DiskScheduleSpec{NodeID: "n", Replicas: map[string]dsv1.RequestedBytes{"a": rb(near63), "b": rb(near63), "c": 1}},
			Disk:      okDisk(1 << 62),
			Persisted: Owners{Replicas: map[string]bool{"a": true, "b": true}},
			Now:       t0, ReservationTimeout: timeout,
		}
		out, _ := decide(t, in)
		wantReq(t, "replica", out.Replicas, "a", dsv1.RequestStatus{State: dsv1.RequestStateScheduled, RequestedSize: near63, ScheduledSize: near63, Message: out.Replicas["a"].Message})
		if st := out.Replicas["c"]; st.State != dsv1.RequestStateRejected {
			t.Errorf("replica c = %+v, want rejected: the disk holds more than an int64 counts", st)
		}
		wantScheduled(t, out, math.MaxInt64)
		wantCondition(t, out, dsv1.DiskScheduleConditionOvercommitted, metav1.ConditionTrue, dsv1.DiskScheduleReasonAdoptedOverLimit)
	})
	t.Run("two huge requests: the second does not fit", func(t *testing.T) {
		in := Input{
			Spec: dsv1.DiskScheduleSpec{NodeID: "n", Replicas: map[string]dsv1.RequestedBytes{"a": rb(near63), "b": rb(near63)},
				Reservations: map[string]dsv1.DiskScheduleReservation{"v": {Size: near63, Pod: "ns/p"}}},
			Disk: okDisk(math.MaxInt64),
			Now:  t0, ReservationTimeout: timeout,
		}
		out, oc := decide(t, in)
		wantOutcome(t, oc, 1, 2, 0, 0)
		wantReq(t, "replica", out.Replicas, "a", granted(near63))
		if out.Replicas["b"].State != dsv1.RequestStateRejected || out.Reservations["v"].State != dsv1.ReservationStateRejected {
			t.Errorf("replica b %+v and reservation v %+v, want both rejected", out.Replicas["b"], out.Reservations["v"])
		}
		wantScheduled(t, out, near63)
	})
	t.Run("a huge growth of a huge grant", func(t *testing.T) {
		in := Input{
			Spec:     dsv1.DiskScheduleSpec{NodeID: "n", Replicas: map[string]dsv1.RequestedBytes{"a": rb(math.MaxInt64), "b": rb(near63)}},
			Previous: dsv1.DiskScheduleStatus{Replicas: map[string]dsv1.RequestStatus{"a": granted(near63), "b": granted(near63)}},
			Disk:     okDisk(math.MaxInt64),
			Now:      t0, ReservationTimeout: timeout,
		}
		out, _ := decide(t, in)
		if st := out.Replicas["a"]; st.State != dsv1.RequestStateRejected || st.ScheduledSize != near63 {
			t.Errorf("replica a = %+v, want rejected keeping %d", st, near63)
		}
		wantScheduled(t, out, math.MaxInt64)
	})
}
