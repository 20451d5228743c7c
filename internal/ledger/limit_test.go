package ledger

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

// Binary units, untyped so they fit both int64 and RequestedBytes.
const (
	Ki = 1 << 10
	Mi = 1 << 20
	Gi = 1 << 30
	Ti = 1 << 40
	Pi = 1 << 50
	Ei = 1 << 60
)

func TestLimit(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		maximum, reserved, perc int64
		want                    int64
	}{
		{"100% of usable", 500 * Gi, 100 * Gi, 100, 400 * Gi},
		{"over-provisioning 200%", 500 * Gi, 100 * Gi, 200, 800 * Gi},
		{"over-provisioning 150%", 100 * Gi, 0, 150, 150 * Gi},
		{"over-provisioning 0% grants nothing", 500 * Gi, 100 * Gi, 0, 0},
		{"negative percentage grants nothing", 500 * Gi, 0, -100, 0},
		{"no reservation", 1 * Ti, 0, 100, 1 * Ti},
		{"reserved equals maximum", 100 * Gi, 100 * Gi, 200, 0},
		{"reserved above maximum", 100 * Gi, 100*Gi + 1, 200, 0},
		{"empty disk", 0, 0, 100, 0},
		// (101 × 50) / 100 = 50.5, truncated.
		{"truncates 50.5", 101, 0, 50, 50},
		// (199 × 99) / 100 = 197.01.
		{"truncates the remainder part", 199, 0, 99, 197},
		// (1 × 99) / 100 = 0.99.
		{"one byte at 99% truncates to zero", 1, 0, 99, 0},
		{"one byte at 100%", 1, 0, 100, 1},
		{"one byte at 199%", 1, 0, 199, 1},
		{"one byte at 200%", 1, 0, 200, 2},
		// (10Gi+1 − 1) × 33 / 100 = 10Gi × 33 / 100, truncated.
		{"odd bytes at 33%", 10*Gi + 1, 1, 33, 10 * Gi * 33 / 100},
		// (2^62 + 99) × 200 / 100 = 2^63 + 198: does not fit in an int64.
		{"huge disk at 200% saturates", 1<<62 + 99, 0, 200, math.MaxInt64},
		{"largest disk at 100%", math.MaxInt64, 0, 100, math.MaxInt64},
		{"largest disk at 50%", math.MaxInt64, 0, 50, math.MaxInt64 / 2},
		{"largest disk at 99%", math.MaxInt64, 0, 99, bigLimit(math.MaxInt64, 0, 99)},
		{"largest disk at 1%", math.MaxInt64, 0, 1, math.MaxInt64 / 100},
		{"largest disk at 200% saturates", math.MaxInt64, 0, 200, math.MaxInt64},
		{"largest disk less a byte at 100%", math.MaxInt64, 1, 100, math.MaxInt64 - 1},
		{"8Ei at 100%", 8*Ei - 1, 0, 100, 8*Ei - 1},
		{"4Ei at 199%", 4 * Ei, Gi, 199, bigLimit(4*Ei, Gi, 199)},
		{"1Ei at 500%", Ei, 0, 500, 5 * Ei},
		{"huge percentage saturates", 100 * Gi, 0, math.MaxInt64, math.MaxInt64},
		{"huge percentage of 1 byte", 1, 0, math.MaxInt64, math.MaxInt64 / 100},
		{"negative reserved larger than usable int64", math.MaxInt64, -10, 100, math.MaxInt64},
		{"negative reserved", 100, -10, 100, 110},
		{"100% of a whole disk", 100 * Gi, 0, 100, 100 * Gi},
		{"reserved is subtracted", 8_000_000_000, 1_000_000_000, 100, 7_000_000_000},
		{"over-provisioning of a few bytes", 100, 0, 150, 150},
		{"truncated", 101, 0, 33, 33},
		{"truncated odd", 999, 0, 50, 499},
		{"reserved above maximum by more than a byte", 10, 20, 100, 0},
		{"zero percent of a whole disk", 100 * Gi, 0, 0, 0},
		{"large disk without overflow", 1 << 60, 0, 700, 7 << 60},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Limit(tc.maximum, tc.reserved, tc.perc); got != tc.want {
				t.Errorf("Limit(%d, %d, %d) = %d, want %d", tc.maximum, tc.reserved, tc.perc, got, tc.want)
			}
		})
	}
}

// bigLimit is rule 1 computed exactly with big integers, saturated at
// math.MaxInt64 and floored at 0.
func bigLimit(maximum, reserved, perc int64) int64 {
	usable := new(big.Int).Sub(big.NewInt(maximum), big.NewInt(reserved))
	if usable.Sign() <= 0 || perc <= 0 {
		return 0
	}
	l := new(big.Int).Mul(usable, big.NewInt(perc))
	l.Quo(l, big.NewInt(100))
	if !l.IsInt64() {
		return math.MaxInt64
	}
	return l.Int64()
}

func TestLimitMatchesExactArithmetic(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20000; i++ {
		var maximum, reserved, perc int64
		switch i % 4 {
		case 0: // everyday sizes
			maximum = rng.Int64N(64 * Ti)
			reserved = rng.Int64N(maximum/2 + 1)
			perc = rng.Int64N(501)
		case 1: // around the int64 edge
			maximum = math.MaxInt64 - rng.Int64N(1<<40)
			reserved = rng.Int64N(1 << 40)
			perc = rng.Int64N(300)
		case 2: // anything
			maximum = rng.Int64()
			reserved = rng.Int64()
			perc = rng.Int64N(1000)
		case 3: // tiny
			maximum = rng.Int64N(300)
			reserved = rng.Int64N(300)
			perc = rng.Int64N(300)
		}
		if got, want := Limit(maximum, reserved, perc), bigLimit(maximum, reserved, perc); got != want {
			t.Fatalf("Limit(%d, %d, %d) = %d, want %d", maximum, reserved, perc, got, want)
		}
	}
}

// TestFits holds Fits to scheduled + growth <= limit in exact arithmetic,
// for ledgers at their limit, over it (adopted, rule 7) and near the int64
// edge.
func TestFits(t *testing.T) {
	cases := []struct {
		name                     string
		scheduled, growth, limit int64
		want                     bool
	}{
		{"room left", 40 * Gi, 60 * Gi, 100 * Gi, true},
		{"one byte over", 40 * Gi, 60*Gi + 1, 100 * Gi, false},
		{"a shrink back under the limit", 120 * Gi, -30 * Gi, 100 * Gi, true},
		{"growth over an overcommitted limit", 120 * Gi, 1, 100 * Gi, false},
		{"huge limit", 1, math.MaxInt64 - 1, math.MaxInt64, true},
		{"huge growth", 1, math.MaxInt64, math.MaxInt64, false},
		{"exact fit", 50, 50, 100, true},
		{"a byte over", 50, 51, 100, false},
		{"a byte onto an overcommitted disk", 120, 1, 100, false},
	}
	for _, c := range cases {
		if got := Fits(c.scheduled, c.growth, c.limit); got != c.want {
			t.Errorf("%s: Fits(%d, %d, %d) = %v, want %v", c.name, c.scheduled, c.growth, c.limit, got, c.want)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 20000; i++ {
		limit := rng.Int64N(math.MaxInt64 / 2)
		scheduled := rng.Int64N(limit/2+1) + int64(i%3)*(limit/2) // under, near and over the limit
		growth := rng.Int64N(limit/2+1) - rng.Int64N(limit/4+1)
		exact := new(big.Int).Add(big.NewInt(scheduled), big.NewInt(growth))
		if got, want := Fits(scheduled, growth, limit), exact.Cmp(big.NewInt(limit)) <= 0; got != want {
			t.Fatalf("Fits(%d, %d, %d) = %v, want %v", scheduled, growth, limit, got, want)
		}
	}
}

func dsWith(spec dsv1.DiskScheduleSpec, status dsv1.DiskScheduleStatus) *dsv1.DiskSchedule {
	return &dsv1.DiskSchedule{Spec: spec, Status: status}
}

func TestPendingGrowthAndFree(t *testing.T) {
	expires := metav1.NewTime(time.Date(2025, 6, 1, 12, 5, 0, 0, time.UTC))
	scheduledRes := func(size int64, pod string) dsv1.ReservationStatus {
		return dsv1.ReservationStatus{State: dsv1.ReservationStateScheduled, RequestedSize: size, Pod: pod, ScheduledSize: size, ExpiresAt: &expires}
	}
	type rb = dsv1.RequestedBytes
	for _, tc := range []struct {
		name        string
		spec        dsv1.DiskScheduleSpec
		status      dsv1.DiskScheduleStatus
		wantPending int64
		wantFree    int64
	}{
		{
			name:        "empty ledger",
			status:      dsv1.DiskScheduleStatus{StorageLimit: 100 * Gi},
			wantPending: 0, wantFree: 100 * Gi,
		},
		{
			name:        "undecided new replica counted in full",
			spec:        dsv1.DiskScheduleSpec{Replicas: map[string]rb{"r-a": 30 * Gi}},
			status:      dsv1.DiskScheduleStatus{StorageLimit: 100 * Gi},
			wantPending: 30 * Gi, wantFree: 70 * Gi,
		},
		{
			name: "undecided growth counted as its delta",
			spec: dsv1.DiskScheduleSpec{Replicas: map[string]rb{"r-a": 45 * Gi}},
			status: dsv1.DiskScheduleStatus{StorageLimit: 100 * Gi, StorageScheduled: 30 * Gi,
				Replicas: map[string]dsv1.RequestStatus{"r-a": granted(30 * Gi)}},
			wantPending: 15 * Gi, wantFree: 55 * Gi,
		},
		{
			name: "undecided shrink counts nothing",
			spec: dsv1.DiskScheduleSpec{Replicas: map[string]rb{"r-a": 10 * Gi}},
			status: dsv1.DiskScheduleStatus{StorageLimit: 100 * Gi, StorageScheduled: 30 * Gi,
				Replicas: map[string]dsv1.RequestStatus{"r-a": granted(30 * Gi)}},
			wantPending: 0, wantFree: 70 * Gi,
		},
		{
			name: "decided entries count nothing: granted and rejected",
			spec: dsv1.DiskScheduleSpec{
				Replicas:      map[string]rb{"r-a": 30 * Gi, "r-b": 90 * Gi},
				BackingImages: map[string]rb{"bi-a": 2 * Gi},
			},
			status: dsv1.DiskScheduleStatus{StorageLimit: 100 * Gi, StorageScheduled: 32 * Gi,
				Replicas: map[string]dsv1.RequestStatus{
					"r-a": granted(30 * Gi),
					"r-b": {State: dsv1.RequestStateRejected, RequestedSize: 90 * Gi, Message: "requested 90Gi, 68Gi free of limit 100Gi"},
				},
				BackingImages: map[string]dsv1.RequestStatus{"bi-a": granted(2 * Gi)}},
			wantPending: 0, wantFree: 68 * Gi,
		},
		{
			name: "rejected expansion at the same size is decided",
			spec: dsv1.DiskScheduleSpec{Replicas: map[string]rb{"r-a": 80 * Gi}},
			status: dsv1.DiskScheduleStatus{StorageLimit: 100 * Gi, StorageScheduled: 30 * Gi,
				Replicas: map[string]dsv1.RequestStatus{"r-a": {State: dsv1.RequestStateRejected, RequestedSize: 80 * Gi, ScheduledSize: 30 * Gi}}},
			wantPending: 0, wantFree: 70 * Gi,
		},
		{
			name: "rejected expansion asked again at another size counts beyond the held size",
			spec: dsv1.DiskScheduleSpec{Replicas: map[string]rb{"r-a": 60 * Gi}},
			status: dsv1.DiskScheduleStatus{StorageLimit: 100 * Gi, StorageScheduled: 30 * Gi,
				Replicas: map[string]dsv1.RequestStatus{"r-a": {State: dsv1.RequestStateRejected, RequestedSize: 80 * Gi, ScheduledSize: 30 * Gi}}},
			wantPending: 30 * Gi, wantFree: 40 * Gi,
		},
		{
			name: "backing images: new in full, growth as delta, shrink nothing",
			spec: dsv1.DiskScheduleSpec{BackingImages: map[string]rb{"bi-new": 3 * Gi, "bi-grow": 5 * Gi, "bi-shrink": 1 * Gi}},
			status: dsv1.DiskScheduleStatus{StorageLimit: 20 * Gi, StorageScheduled: 6 * Gi,
				BackingImages: map[string]dsv1.RequestStatus{"bi-grow": granted(4 * Gi), "bi-shrink": granted(2 * Gi)}},
			wantPending: 4 * Gi, wantFree: 10 * Gi,
		},
		{
			name: "undecided reservation counted; decided one not",
			spec: dsv1.DiskScheduleSpec{Reservations: map[string]dsv1.DiskScheduleReservation{
				"v-new": {Size: 7 * Gi, Pod: "ns/p1"},
				"v-old": {Size: 5 * Gi, Pod: "ns/p2"},
			}},
			status: dsv1.DiskScheduleStatus{StorageLimit: 20 * Gi, StorageScheduled: 5 * Gi,
				Reservations: map[string]dsv1.ReservationStatus{"v-old": scheduledRes(5*Gi, "ns/p2")}},
			wantPending: 7 * Gi, wantFree: 8 * Gi,
		},
		{
			name: "reservation re-written for another pod is undecided",
			spec: dsv1.DiskScheduleSpec{Reservations: map[string]dsv1.DiskScheduleReservation{
				"v": {Size: 5 * Gi, Pod: "ns/other"},
			}},
			status: dsv1.DiskScheduleStatus{StorageLimit: 20 * Gi, StorageScheduled: 5 * Gi,
				Reservations: map[string]dsv1.ReservationStatus{"v": scheduledRes(5*Gi, "ns/p")}},
			wantPending: 5 * Gi, wantFree: 10 * Gi,
		},
		{
			name: "pending replica named by a granted reservation of the same size counts nothing",
			spec: dsv1.DiskScheduleSpec{
				Replicas:     map[string]rb{"r-v": 40 * Gi},
				Reservations: map[string]dsv1.DiskScheduleReservation{"v": {Size: 40 * Gi, Pod: "ns/p", Replica: "r-v"}},
			},
			status: dsv1.DiskScheduleStatus{StorageLimit: 100 * Gi, StorageScheduled: 100 * Gi,
				Replicas:     map[string]dsv1.RequestStatus{"r-a": granted(60 * Gi)},
				Reservations: map[string]dsv1.ReservationStatus{"v": scheduledRes(40*Gi, "ns/p")}},
			wantPending: 0, wantFree: 0,
		},
		{
			name: "pending replica named by a granted reservation counts only beyond it",
			spec: dsv1.DiskScheduleSpec{
				Replicas:     map[string]rb{"r-v": 50 * Gi},
				Reservations: map[string]dsv1.DiskScheduleReservation{"v": {Size: 40 * Gi, Pod: "ns/p", Replica: "r-v"}},
			},
			status: dsv1.DiskScheduleStatus{StorageLimit: 100 * Gi, StorageScheduled: 40 * Gi,
				Reservations: map[string]dsv1.ReservationStatus{"v": scheduledRes(40*Gi, "ns/p")}},
			wantPending: 10 * Gi, wantFree: 50 * Gi,
		},
		{
			name: "pending replica smaller than its reservation counts nothing",
			spec: dsv1.DiskScheduleSpec{
				Replicas:     map[string]rb{"r-v": 30 * Gi},
				Reservations: map[string]dsv1.DiskScheduleReservation{"v": {Size: 40 * Gi, Pod: "ns/p", Replica: "r-v"}},
			},
			status: dsv1.DiskScheduleStatus{StorageLimit: 100 * Gi, StorageScheduled: 40 * Gi,
				Reservations: map[string]dsv1.ReservationStatus{"v": scheduledRes(40*Gi, "ns/p")}},
			wantPending: 0, wantFree: 60 * Gi,
		},
		{
			name: "replica named by an expired reservation counts in full",
			spec: dsv1.DiskScheduleSpec{
				Replicas:     map[string]rb{"r-v": 40 * Gi},
				Reservations: map[string]dsv1.DiskScheduleReservation{"v": {Size: 40 * Gi, Pod: "ns/p", Replica: "r-v"}},
			},
			status: dsv1.DiskScheduleStatus{StorageLimit: 100 * Gi,
				Reservations: map[string]dsv1.ReservationStatus{"v": {State: dsv1.ReservationStateExpired, RequestedSize: 40 * Gi, Pod: "ns/p"}}},
			wantPending: 40 * Gi, wantFree: 60 * Gi,
		},
		{
			name: "replica named by an undecided reservation: charged once, to the replica",
			spec: dsv1.DiskScheduleSpec{
				Replicas:     map[string]rb{"r-v": 40 * Gi},
				Reservations: map[string]dsv1.DiskScheduleReservation{"v": {Size: 40 * Gi, Pod: "ns/p", Replica: "r-v"}},
			},
			status:      dsv1.DiskScheduleStatus{StorageLimit: 100 * Gi},
			wantPending: 40 * Gi, wantFree: 60 * Gi,
		},
		{
			name: "a reservation that names a replica not in the spec holds nothing for others",
			spec: dsv1.DiskScheduleSpec{
				Replicas:     map[string]rb{"r-other": 10 * Gi},
				Reservations: map[string]dsv1.DiskScheduleReservation{"v": {Size: 40 * Gi, Pod: "ns/p", Replica: "r-v"}},
			},
			status: dsv1.DiskScheduleStatus{StorageLimit: 100 * Gi, StorageScheduled: 40 * Gi,
				Reservations: map[string]dsv1.ReservationStatus{"v": scheduledRes(40*Gi, "ns/p")}},
			wantPending: 10 * Gi, wantFree: 50 * Gi,
		},
		{
			name: "free never negative: over the limit",
			spec: dsv1.DiskScheduleSpec{Replicas: map[string]rb{"r-a": 80 * Gi, "r-b": 1}},
			status: dsv1.DiskScheduleStatus{StorageLimit: 50 * Gi, StorageScheduled: 80 * Gi,
				Replicas: map[string]dsv1.RequestStatus{"r-a": granted(80 * Gi)}},
			wantPending: 1, wantFree: 0,
		},
		{
			name:        "free never negative: pending beyond the limit",
			spec:        dsv1.DiskScheduleSpec{Replicas: map[string]rb{"r-a": 100*Gi + 1}},
			status:      dsv1.DiskScheduleStatus{StorageLimit: 100 * Gi},
			wantPending: 100*Gi + 1, wantFree: 0,
		},
		{
			name:        "free exactly zero",
			spec:        dsv1.DiskScheduleSpec{Replicas: map[string]rb{"r-a": 100 * Gi}},
			status:      dsv1.DiskScheduleStatus{StorageLimit: 100 * Gi},
			wantPending: 100 * Gi, wantFree: 0,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := dsWith(tc.spec, tc.status)
			if got := PendingGrowth(ds); got != tc.wantPending {
				t.Errorf("PendingGrowth = %d (%s), want %d (%s)", got, Bytes(got), tc.wantPending, Bytes(tc.wantPending))
			}
			if got := Free(ds); got != tc.wantFree {
				t.Errorf("Free = %d (%s), want %d (%s)", got, Bytes(got), tc.wantFree, Bytes(tc.wantFree))
			}
		})
	}
}

// TestFreeAgreesWithDecide checks the promise requesters rely on: a request
// that fits in Free is granted by the next decision.
func TestFreeAgreesWithDecide(t *testing.T) {
	type rb = dsv1.RequestedBytes
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	expires := metav1.NewTime(now.Add(time.Minute))
	spec := dsv1.DiskScheduleSpec{
		Replicas:      map[string]rb{"r-a": 30 * Gi, "r-b": 20 * Gi, "r-v": 25 * Gi},
		BackingImages: map[string]rb{"bi-a": 5 * Gi},
		Reservations:  map[string]dsv1.DiskScheduleReservation{"v": {Size: 20 * Gi, Pod: "ns/p", Replica: "r-v"}},
	}
	status := dsv1.DiskScheduleStatus{
		StorageLimit: 100 * Gi, StorageScheduled: 40 * Gi,
		Replicas:     map[string]dsv1.RequestStatus{"r-a": granted(20 * Gi)},
		Reservations: map[string]dsv1.ReservationStatus{"v": {State: dsv1.ReservationStateScheduled, RequestedSize: 20 * Gi, Pod: "ns/p", ScheduledSize: 20 * Gi, ExpiresAt: &expires}},
	}
	// Pending: r-a +10Gi, r-b 20Gi, r-v 5Gi beyond its reservation, bi-a 5Gi.
	free := Free(dsWith(spec, status))
	if free != 20*Gi {
		t.Fatalf("Free = %s, want 20Gi", Bytes(free))
	}
	for _, extra := range []int64{free, free + 1} {
		spec := *spec.DeepCopy()
		spec.Replicas["r-new"] = rb(extra)
		out, oc := Decide(Input{Spec: spec, Generation: 2, Previous: status, Disk: okDisk(100 * Gi), ReservationTimeout: time.Minute, Now: now})
		wantRejected := 0
		if extra > free {
			wantRejected = 1
		}
		if oc.Rejected != wantRejected {
			t.Errorf("extra %d: %d rejected, want %d: %+v", extra, oc.Rejected, wantRejected, out)
		}
		if out.StorageScheduled > 100*Gi {
			t.Errorf("extra %d: storageScheduled %d over the limit", extra, out.StorageScheduled)
		}
	}
}
