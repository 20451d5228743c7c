package ledger

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

type rb = dsv1.RequestedBytes

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

const timeout = 5 * time.Minute

func okDisk(limit int64) Disk {
	return Disk{Limit: limit, Schedulable: true, Reason: dsv1.DiskScheduleReasonSchedulable, Message: "disk is schedulable"}
}

func granted(size int64) dsv1.RequestStatus {
	return dsv1.RequestStatus{State: dsv1.RequestStateScheduled, RequestedSize: size, ScheduledSize: size}
}

func rejected(requested, held int64, msg string) dsv1.RequestStatus {
	return dsv1.RequestStatus{State: dsv1.RequestStateRejected, RequestedSize: requested, ScheduledSize: held, Message: msg}
}

func resScheduled(size int64, pod string, expires time.Time) dsv1.ReservationStatus {
	at := metav1.NewTime(expires)
	return dsv1.ReservationStatus{State: dsv1.ReservationStateScheduled, RequestedSize: size, Pod: pod, ScheduledSize: size, ExpiresAt: &at}
}

// decide runs Decide and checks what must hold for every decision: it is
// deterministic, leaves its input alone, keeps the ledger's invariant
// (Violation), the generation and limit are recorded, and deciding the result
// again changes nothing.
func decide(t *testing.T, in Input) (dsv1.DiskScheduleStatus, Outcome) {
	t.Helper()
	specBefore := in.Spec.DeepCopy()
	prevBefore := in.Previous.DeepCopy()
	out, oc := Decide(in)
	for i := 0; i < 3; i++ {
		again, oc2 := Decide(in)
		if !reflect.DeepEqual(out, again) || !reflect.DeepEqual(oc, oc2) {
			t.Fatalf("Decide is not deterministic:\n%+v %+v\n%+v %+v", out, oc, again, oc2)
		}
	}
	if !reflect.DeepEqual(*specBefore, in.Spec) || !reflect.DeepEqual(*prevBefore, in.Previous) {
		t.Fatalf("Decide changed its input")
	}
	if v := Violation(out); v != "" {
		t.Errorf("invariant broken: %s: %+v", v, out)
	}
	if out.ObservedGeneration != in.Generation {
		t.Errorf("observedGeneration = %d, want %d", out.ObservedGeneration, in.Generation)
	}
	if out.StorageLimit != in.Disk.Limit {
		t.Errorf("storageLimit = %d, want %d", out.StorageLimit, in.Disk.Limit)
	}
	for _, typ := range []string{dsv1.DiskScheduleConditionReady, dsv1.DiskScheduleConditionOvercommitted} {
		c := meta.FindStatusCondition(out.Conditions, typ)
		if c == nil {
			t.Errorf("condition %s missing", typ)
		} else if c.ObservedGeneration != in.Generation {
			t.Errorf("condition %s observedGeneration = %d, want %d", typ, c.ObservedGeneration, in.Generation)
		}
	}
	// A decision decided again is stable.
	next := in
	next.Previous = out
	stable, oc3 := Decide(next)
	if !reflect.DeepEqual(out, stable) {
		t.Errorf("deciding the result again changed it:\n%+v\n%+v", out, stable)
	}
	if oc3.Granted != 0 || oc3.Rejected != 0 || oc3.Released != 0 || oc3.Adopted != 0 || !oc3.NextExpiry.Equal(oc.NextExpiry) {
		t.Errorf("deciding the result again: outcome %+v", oc3)
	}
	return out, oc
}

func wantReq(t *testing.T, kind string, got map[string]dsv1.RequestStatus, name string, want dsv1.RequestStatus) {
	t.Helper()
	g, ok := got[name]
	if !ok {
		t.Errorf("%s %s: no status entry, want %+v", kind, name, want)
		return
	}
	if !reflect.DeepEqual(g, want) {
		t.Errorf("%s %s:\n got %+v\nwant %+v", kind, name, g, want)
	}
}

func wantRes(t *testing.T, got map[string]dsv1.ReservationStatus, name string, want dsv1.ReservationStatus) {
	t.Helper()
	g, ok := got[name]
	if !ok {
		t.Errorf("reservation %s: no status entry, want %+v", name, want)
		return
	}
	if !reflect.DeepEqual(g, want) {
		t.Errorf("reservation %s:\n got %+v (expiresAt %v)\nwant %+v (expiresAt %v)", name, g, g.ExpiresAt, want, want.ExpiresAt)
	}
}

// holding is the note a refusal carries while reservations of volumes that
// are not best-effort, bytes in all, hold space and do not yield yet.
func holding(bytes int64) string {
	return "; reservations that do not yield yet hold " + Bytes(bytes) + ", each for at most " + timeout.String() + " before and " + timeout.String() + " after its pod is bound"
}

func wantOutcome(t *testing.T, got Outcome, granted, rejected, released, adopted int) {
	t.Helper()
	if got.Granted != granted || got.Rejected != rejected || got.Released != released || got.Adopted != adopted {
		t.Errorf("outcome granted/rejected/released/adopted = %d/%d/%d/%d, want %d/%d/%d/%d",
			got.Granted, got.Rejected, got.Released, got.Adopted, granted, rejected, released, adopted)
	}
}

func wantScheduled(t *testing.T, st dsv1.DiskScheduleStatus, want int64) {
	t.Helper()
	if st.StorageScheduled != want {
		t.Errorf("storageScheduled = %d (%s), want %d (%s)", st.StorageScheduled, Bytes(st.StorageScheduled), want, Bytes(want))
	}
}

func wantCondition(t *testing.T, st dsv1.DiskScheduleStatus, typ string, status metav1.ConditionStatus, reason string, msgParts ...string) {
	t.Helper()
	c := meta.FindStatusCondition(st.Conditions, typ)
	if c == nil {
		t.Fatalf("condition %s missing", typ)
	}
	if c.Status != status || c.Reason != reason {
		t.Errorf("condition %s = %s/%s (%q), want %s/%s", typ, c.Status, c.Reason, c.Message, status, reason)
	}
	for _, p := range msgParts {
		if !strings.Contains(c.Message, p) {
			t.Errorf("condition %s message %q does not contain %q", typ, c.Message, p)
		}
	}
}

func TestDecideFit(t *testing.T) {
	prev := dsv1.DiskScheduleStatus{
		StorageScheduled: 60 * Gi, StorageLimit: 100 * Gi,
		Replicas: map[string]dsv1.RequestStatus{"r-a": granted(60 * Gi)},
	}
	for _, tc := range []struct {
		name      string
		spec      dsv1.DiskScheduleSpec
		limit     int64
		check     func(t *testing.T, st dsv1.DiskScheduleStatus)
		scheduled int64
		granted   int
		rejected  int
	}{
		{
			name:  "replica exact fit granted",
			spec:  dsv1.DiskScheduleSpec{Replicas: map[string]rb{"r-a": 60 * Gi, "r-b": 40 * Gi}},
			limit: 100 * Gi,
			check: func(t *testing.T, st dsv1.DiskScheduleStatus) {
				wantReq(t, "replica", st.Replicas, "r-b", granted(40*Gi))
			},
			scheduled: 100 * Gi, granted: 1,
		},
		{
			name:  "replica one byte over rejected",
			spec:  dsv1.DiskScheduleSpec{Replicas: map[string]rb{"r-a": 60 * Gi, "r-b": 40*Gi + 1}},
			limit: 100 * Gi,
			check: func(t *testing.T, st dsv1.DiskScheduleStatus) {
				wantReq(t, "replica", st.Replicas, "r-b", rejected(40*Gi+1, 0, "requested 42949672961, 40Gi free of limit 100Gi"))
			},
			scheduled: 60 * Gi, rejected: 1,
		},
		{
			name:  "replica one byte over an odd limit",
			spec:  dsv1.DiskScheduleSpec{Replicas: map[string]rb{"r-a": 60 * Gi, "r-b": 40*Gi + 1}},
			limit: 100*Gi + 1,
			check: func(t *testing.T, st dsv1.DiskScheduleStatus) {
				wantReq(t, "replica", st.Replicas, "r-b", granted(40*Gi+1))
			},
			scheduled: 100*Gi + 1, granted: 1,
		},
		{
			name:  "backing image exact fit granted",
			spec:  dsv1.DiskScheduleSpec{Replicas: map[string]rb{"r-a": 60 * Gi}, BackingImages: map[string]rb{"bi-a": 40 * Gi}},
			limit: 100 * Gi,
			check: func(t *testing.T, st dsv1.DiskScheduleStatus) {
				wantReq(t, "backing image", st.BackingImages, "bi-a", granted(40*Gi))
			},
			scheduled: 100 * Gi, granted: 1,
		},
		{
			name:  "backing image one byte over rejected",
			spec:  dsv1.DiskScheduleSpec{Replicas: map[string]rb{"r-a": 60 * Gi}, BackingImages: map[string]rb{"bi-a": 40*Gi + 1}},
			limit: 100 * Gi,
			check: func(t *testing.T, st dsv1.DiskScheduleStatus) {
				wantReq(t, "backing image", st.BackingImages, "bi-a", rejected(40*Gi+1, 0, "requested 42949672961, 40Gi free of limit 100Gi"))
			},
			scheduled: 60 * Gi, rejected: 1,
		},
		{
			name: "reservation exact fit granted",
			spec: dsv1.DiskScheduleSpec{Replicas: map[string]rb{"r-a": 60 * Gi},
				Reservations: map[string]dsv1.DiskScheduleReservation{"v": {Size: 40 * Gi, Pod: "ns/p"}}},
			limit: 100 * Gi,
			check: func(t *testing.T, st dsv1.DiskScheduleStatus) {
				wantRes(t, st.Reservations, "v", resScheduled(40*Gi, "ns/p", t0.Add(timeout)))
			},
			scheduled: 100 * Gi, granted: 1,
		},
		{
			name: "reservation one byte over rejected",
			spec: dsv1.DiskScheduleSpec{Replicas: map[string]rb{"r-a": 60 * Gi},
				Reservations: map[string]dsv1.DiskScheduleReservation{"v": {Size: 40*Gi + 1, Pod: "ns/p"}}},
			limit: 100 * Gi,
			check: func(t *testing.T, st dsv1.DiskScheduleStatus) {
				wantRes(t, st.Reservations, "v", dsv1.ReservationStatus{
					State: dsv1.ReservationStateRejected, RequestedSize: 40*Gi + 1, Pod: "ns/p",
					Message: "requested 42949672961, 40Gi free of limit 100Gi"})
			},
			scheduled: 60 * Gi, rejected: 1,
		},
		{
			name:  "new request on a disk already over its limit says 0 free",
			spec:  dsv1.DiskScheduleSpec{Replicas: map[string]rb{"r-a": 60 * Gi, "r-b": 1536 * Mi}},
			limit: 50 * Gi,
			check: func(t *testing.T, st dsv1.DiskScheduleStatus) {
				wantReq(t, "replica", st.Replicas, "r-a", granted(60*Gi))
				wantReq(t, "replica", st.Replicas, "r-b", rejected(1536*Mi, 0, "requested 1536Mi, 0 free of limit 50Gi"))
			},
			scheduled: 60 * Gi, rejected: 1,
		},
		{
			name:  "zero limit rejects even one byte",
			spec:  dsv1.DiskScheduleSpec{Replicas: map[string]rb{"r-a": 60 * Gi, "r-b": 1}},
			limit: 0,
			check: func(t *testing.T, st dsv1.DiskScheduleStatus) {
				wantReq(t, "replica", st.Replicas, "r-b", rejected(1, 0, "requested 1, 0 free of limit 0"))
			},
			scheduled: 60 * Gi, rejected: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, oc := decide(t, Input{Spec: tc.spec, Generation: 3, Previous: prev, Disk: okDisk(tc.limit), ReservationTimeout: timeout, Now: t0})
			tc.check(t, st)
			wantScheduled(t, st, tc.scheduled)
			wantOutcome(t, oc, tc.granted, tc.rejected, 0, 0)
			wantReq(t, "replica", st.Replicas, "r-a", granted(60*Gi))
		})
	}
}

func TestDecideOrder(t *testing.T) {
	// Five requests of 10Gi, limit 30Gi: replicas first, then backing images,
	// then reservations, each by name.
	spec := dsv1.DiskScheduleSpec{
		Replicas:      map[string]rb{"r-b": 10 * Gi, "r-a": 10 * Gi},
		BackingImages: map[string]rb{"bi-b": 10 * Gi, "bi-a": 10 * Gi},
		Reservations:  map[string]dsv1.DiskScheduleReservation{"a-vol": {Size: 10 * Gi, Pod: "ns/p"}},
	}
	in := Input{Spec: spec, Generation: 1, Disk: okDisk(30 * Gi), ReservationTimeout: timeout, Now: t0}
	st, oc := decide(t, in)
	wantReq(t, "replica", st.Replicas, "r-a", granted(10*Gi))
	wantReq(t, "replica", st.Replicas, "r-b", granted(10*Gi))
	wantReq(t, "backing image", st.BackingImages, "bi-a", granted(10*Gi))
	wantReq(t, "backing image", st.BackingImages, "bi-b", rejected(10*Gi, 0, "requested 10Gi, 0 free of limit 30Gi"))
	wantRes(t, st.Reservations, "a-vol", dsv1.ReservationStatus{State: dsv1.ReservationStateRejected,
		RequestedSize: 10 * Gi, Pod: "ns/p", Message: "requested 10Gi, 0 free of limit 30Gi"})
	wantScheduled(t, st, 30*Gi)
	wantOutcome(t, oc, 3, 2, 0, 0)

	// Building the same spec with the maps filled in other orders decides
	// the same.
	for i := 0; i < 20; i++ {
		other := dsv1.DiskScheduleSpec{Replicas: map[string]rb{}, BackingImages: map[string]rb{}, Reservations: map[string]dsv1.DiskScheduleReservation{}}
		names := [][]string{{"r-a", "r-b"}, {"r-b", "r-a"}}[i%2]
		for _, k := range names {
			other.Replicas[k] = 10 * Gi
		}
		for _, k := range []string{"bi-b", "bi-a"}[i%2:] {
			other.BackingImages[k] = 10 * Gi
		}
		for _, k := range []string{"bi-a", "bi-b"} {
			other.BackingImages[k] = 10 * Gi
		}
		other.Reservations["a-vol"] = spec.Reservations["a-vol"]
		in2 := in
		in2.Spec = other
		st2, oc2 := Decide(in2)
		if !reflect.DeepEqual(st, st2) || !reflect.DeepEqual(oc, oc2) {
			t.Fatalf("same input decided differently:\n%+v\n%+v", st, st2)
		}
	}
}

func TestDecideOrderFirstFit(t *testing.T) {
	// Requests are taken in order; one that does not fit does not stop a
	// later smaller one that does.
	spec := dsv1.DiskScheduleSpec{
		Replicas:      map[string]rb{"r-a": 10 * Gi, "r-b": 20 * Gi, "r-c": 5 * Gi},
		BackingImages: map[string]rb{"bi-a": 5 * Gi, "bi-b": 1},
		Reservations:  map[string]dsv1.DiskScheduleReservation{"v": {Size: 1, Pod: "ns/p"}},
	}
	st, oc := decide(t, Input{Spec: spec, Generation: 1, Disk: okDisk(20 * Gi), ReservationTimeout: timeout, Now: t0})
	wantReq(t, "replica", st.Replicas, "r-a", granted(10*Gi))
	wantReq(t, "replica", st.Replicas, "r-b", rejected(20*Gi, 0, "requested 20Gi, 10Gi free of limit 20Gi"))
	wantReq(t, "replica", st.Replicas, "r-c", granted(5*Gi))
	wantReq(t, "backing image", st.BackingImages, "bi-a", granted(5*Gi))
	wantReq(t, "backing image", st.BackingImages, "bi-b", rejected(1, 0, "requested 1, 0 free of limit 20Gi"))
	if got := st.Reservations["v"]; got.State != dsv1.ReservationStateRejected || got.ScheduledSize != 0 {
		t.Errorf("reservation v = %+v, want rejected", got)
	}
	wantScheduled(t, st, 20*Gi)
	wantOutcome(t, oc, 3, 3, 0, 0)
}

func TestDecideShrinkAlwaysGranted(t *testing.T) {
	prev := dsv1.DiskScheduleStatus{
		StorageScheduled: 90 * Gi, StorageLimit: 100 * Gi,
		Replicas:      map[string]dsv1.RequestStatus{"r-a": granted(60 * Gi), "r-b": granted(20 * Gi)},
		BackingImages: map[string]dsv1.RequestStatus{"bi-a": granted(10 * Gi)},
	}
	spec := dsv1.DiskScheduleSpec{
		Replicas:      map[string]rb{"r-a": 50 * Gi, "r-b": 20 * Gi},
		BackingImages: map[string]rb{"bi-a": 10*Gi - 1},
	}
	for _, tc := range []struct {
		name string
		disk Disk
	}{
		{"within the limit", okDisk(100 * Gi)},
		{"disk over its limit", okDisk(40 * Gi)},
		{"zero limit", okDisk(0)},
		{"disk not schedulable and over its limit", Disk{Limit: 10 * Gi, Reason: dsv1.DiskScheduleReasonDiskEvictionRequested, Message: "eviction requested"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, oc := decide(t, Input{Spec: spec, Generation: 2, Previous: prev, Disk: tc.disk, ReservationTimeout: timeout, Now: t0})
			wantReq(t, "replica", st.Replicas, "r-a", granted(50*Gi))
			wantReq(t, "replica", st.Replicas, "r-b", granted(20*Gi))
			wantReq(t, "backing image", st.BackingImages, "bi-a", granted(10*Gi-1))
			wantScheduled(t, st, 80*Gi-1)
			wantOutcome(t, oc, 2, 0, 0, 0)
		})
	}
}

func TestDecideGrowth(t *testing.T) {
	// r-a holds 30Gi, r-b 50Gi, limit 100Gi: 20Gi free.
	prev := dsv1.DiskScheduleStatus{
		StorageScheduled: 80 * Gi, StorageLimit: 100 * Gi,
		Replicas: map[string]dsv1.RequestStatus{"r-a": granted(30 * Gi), "r-b": granted(50 * Gi)},
	}
	for _, tc := range []struct {
		name      string
		replicas  map[string]rb
		disk      Disk
		wantA     dsv1.RequestStatus
		wantB     dsv1.RequestStatus
		scheduled int64
		granted   int
		rejected  int
	}{
		{
			name:     "growth by exactly the free space granted",
			replicas: map[string]rb{"r-a": 50 * Gi, "r-b": 50 * Gi},
			disk:     okDisk(100 * Gi),
			wantA:    granted(50 * Gi), wantB: granted(50 * Gi),
			scheduled: 100 * Gi, granted: 1,
		},
		{
			name:      "growth one byte beyond the free space rejected, keeping the old size",
			replicas:  map[string]rb{"r-a": 50*Gi + 1, "r-b": 50 * Gi},
			disk:      okDisk(100 * Gi),
			wantA:     rejected(50*Gi+1, 30*Gi, "expansion from 30Gi to 53687091201 needs 21474836481 more, 20Gi free of limit 100Gi"),
			wantB:     granted(50 * Gi),
			scheduled: 80 * Gi, rejected: 1,
		},
		{
			// Both grow by 10Gi: together exactly the 20Gi free.
			name:     "two growths filling the disk exactly",
			replicas: map[string]rb{"r-a": 40 * Gi, "r-b": 60 * Gi},
			disk:     okDisk(100 * Gi),
			wantA:    granted(40 * Gi), wantB: granted(60 * Gi),
			scheduled: 100 * Gi, granted: 2,
		},
		{
			name:      "two growths: the first by name wins, the second keeps its size",
			replicas:  map[string]rb{"r-a": 45 * Gi, "r-b": 60 * Gi},
			disk:      okDisk(100 * Gi),
			wantA:     granted(45 * Gi),
			wantB:     rejected(60*Gi, 50*Gi, "expansion from 50Gi to 60Gi needs 10Gi more, 5Gi free of limit 100Gi"),
			scheduled: 95 * Gi, granted: 1, rejected: 1,
		},
		{
			// The 50Gi r-b already holds are not free for r-a's growth,
			// decided before r-b's: r-a takes the 20Gi free, r-b's 1Gi more
			// does not fit and r-b keeps its 50Gi.
			name:      "a growth cannot take the bytes another growing entry holds",
			replicas:  map[string]rb{"r-a": 50 * Gi, "r-b": 51 * Gi},
			disk:      okDisk(100 * Gi),
			wantA:     granted(50 * Gi),
			wantB:     rejected(51*Gi, 50*Gi, "expansion from 50Gi to 51Gi needs 1Gi more, 0 free of limit 100Gi"),
			scheduled: 100 * Gi, granted: 1, rejected: 1,
		},
		{
			name:      "growth by one byte more than the free space, while the other grows too",
			replicas:  map[string]rb{"r-a": 50*Gi + 1, "r-b": 51 * Gi},
			disk:      okDisk(100 * Gi),
			wantA:     rejected(50*Gi+1, 30*Gi, "expansion from 30Gi to 53687091201 needs 21474836481 more, 20Gi free of limit 100Gi"),
			wantB:     granted(51 * Gi),
			scheduled: 81 * Gi, granted: 1, rejected: 1,
		},
		{
			// Rule 8: growth of what is placed is judged on space alone, as
			// Longhorn judges a volume's expansion.
			name:      "growth on a disk that is not schedulable granted when it fits",
			replicas:  map[string]rb{"r-a": 31 * Gi, "r-b": 50 * Gi},
			disk:      Disk{Limit: 100 * Gi, Reason: dsv1.DiskScheduleReasonNodeNotReady, Message: "node n1 is not Ready"},
			wantA:     granted(31 * Gi),
			wantB:     granted(50 * Gi),
			scheduled: 81 * Gi, granted: 1,
		},
		{
			name:      "growth on a cordoned node beyond the free space rejected for space",
			replicas:  map[string]rb{"r-a": 51 * Gi, "r-b": 50 * Gi},
			disk:      Disk{Limit: 100 * Gi, Reason: dsv1.DiskScheduleReasonNodeUnschedulable, Message: "node n1 is cordoned"},
			wantA:     rejected(51*Gi, 30*Gi, "expansion from 30Gi to 51Gi needs 21Gi more, 20Gi free of limit 100Gi"),
			wantB:     granted(50 * Gi),
			scheduled: 80 * Gi, rejected: 1,
		},
		{
			name:      "growth on a disk over its limit rejected",
			replicas:  map[string]rb{"r-a": 31 * Gi, "r-b": 50 * Gi},
			disk:      okDisk(70 * Gi),
			wantA:     rejected(31*Gi, 30*Gi, "expansion from 30Gi to 31Gi needs 1Gi more, 0 free of limit 70Gi"),
			wantB:     granted(50 * Gi),
			scheduled: 80 * Gi, rejected: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, oc := decide(t, Input{Spec: dsv1.DiskScheduleSpec{Replicas: tc.replicas}, Generation: 2, Previous: prev, Disk: tc.disk, ReservationTimeout: timeout, Now: t0})
			wantReq(t, "replica", st.Replicas, "r-a", tc.wantA)
			wantReq(t, "replica", st.Replicas, "r-b", tc.wantB)
			wantScheduled(t, st, tc.scheduled)
			wantOutcome(t, oc, tc.granted, tc.rejected, 0, 0)
			if tc.disk.Limit >= prev.StorageScheduled && st.StorageScheduled > tc.disk.Limit {
				t.Errorf("storageScheduled %s over the limit %s", Bytes(st.StorageScheduled), Bytes(tc.disk.Limit))
			}
		})
	}
}

// TestDecideGrowthKeepsHeldBytes is the regression test for growth being
// checked against free space that did not count the bytes the growing
// requests already held: both entries fit, both grow, and the limit must
// hold whatever the order.
func TestDecideGrowthKeepsHeldBytes(t *testing.T) {
	prev := dsv1.DiskScheduleStatus{
		StorageScheduled: 100, StorageLimit: 100,
		Replicas:      map[string]dsv1.RequestStatus{"r-a": granted(50)},
		BackingImages: map[string]dsv1.RequestStatus{"bi-a": granted(50)},
	}
	for _, tc := range []struct {
		name string
		spec dsv1.DiskScheduleSpec
	}{
		{"replica grows on a full disk", dsv1.DiskScheduleSpec{Replicas: map[string]rb{"r-a": 60}, BackingImages: map[string]rb{"bi-a": 50}}},
		{"backing image grows on a full disk", dsv1.DiskScheduleSpec{Replicas: map[string]rb{"r-a": 50}, BackingImages: map[string]rb{"bi-a": 60}}},
		{"both grow", dsv1.DiskScheduleSpec{Replicas: map[string]rb{"r-a": 60}, BackingImages: map[string]rb{"bi-a": 60}}},
		{"new request before a held growth", dsv1.DiskScheduleSpec{Replicas: map[string]rb{"r-0": 40, "r-a": 50}, BackingImages: map[string]rb{"bi-a": 60}}},
		{"reservation on a full disk whose entries grow", dsv1.DiskScheduleSpec{Replicas: map[string]rb{"r-a": 51}, BackingImages: map[string]rb{"bi-a": 51},
			Reservations: map[string]dsv1.DiskScheduleReservation{"v": {Size: 1, Pod: "ns/p"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, oc := decide(t, Input{Spec: tc.spec, Generation: 2, Previous: prev, Disk: okDisk(100), ReservationTimeout: timeout, Now: t0})
			wantScheduled(t, st, 100)
			if oc.Granted != 0 {
				t.Errorf("%d granted on a full disk: %+v", oc.Granted, st)
			}
			wantCondition(t, st, dsv1.DiskScheduleConditionOvercommitted, metav1.ConditionFalse, dsv1.DiskScheduleReasonWithinLimit)
		})
	}
	// With 10 bytes free, the replica's growth by 11 does not fit and the
	// backing image's growth by 10, decided after it, fits exactly.
	prev.StorageLimit = 110
	st, _ := decide(t, Input{Spec: dsv1.DiskScheduleSpec{Replicas: map[string]rb{"r-a": 61}, BackingImages: map[string]rb{"bi-a": 60}},
		Generation: 3, Previous: prev, Disk: okDisk(110), ReservationTimeout: timeout, Now: t0})
	wantReq(t, "replica", st.Replicas, "r-a", rejected(61, 50, "expansion from 50 to 61 needs 11 more, 10 free of limit 110"))
	wantReq(t, "backing image", st.BackingImages, "bi-a", granted(60))
	wantScheduled(t, st, 110)
}

func TestDecideRejectedExpansionThenShrinkBack(t *testing.T) {
	disk := okDisk(100 * Gi)
	in := Input{
		Spec:       dsv1.DiskScheduleSpec{Replicas: map[string]rb{"r-a": 40 * Gi, "r-b": 50 * Gi}},
		Generation: 1, Disk: disk, ReservationTimeout: timeout, Now: t0,
	}
	st, _ := decide(t, in)
	wantScheduled(t, st, 90*Gi)

	// Expansion of r-a to 60Gi needs 20Gi, 10Gi free: rejected, 40Gi kept.
	in.Spec.Replicas["r-a"] = 60 * Gi
	in.Generation, in.Previous = 2, st
	st, oc := decide(t, in)
	wantReq(t, "replica", st.Replicas, "r-a", rejected(60*Gi, 40*Gi, "expansion from 40Gi to 60Gi needs 20Gi more, 10Gi free of limit 100Gi"))
	wantScheduled(t, st, 90*Gi)
	wantOutcome(t, oc, 0, 1, 0, 0)

	// Nothing changed: the rejection stands and is not counted again.
	in.Generation, in.Previous = 3, st
	st, oc = decide(t, in)
	wantReq(t, "replica", st.Replicas, "r-a", rejected(60*Gi, 40*Gi, "expansion from 40Gi to 60Gi needs 20Gi more, 10Gi free of limit 100Gi"))
	wantOutcome(t, oc, 0, 0, 0, 0)

	// Shrinking the request back to the old size is granted.
	in.Spec.Replicas["r-a"] = 40 * Gi
	in.Generation, in.Previous = 4, st
	st, oc = decide(t, in)
	wantReq(t, "replica", st.Replicas, "r-a", granted(40*Gi))
	wantScheduled(t, st, 90*Gi)
	wantOutcome(t, oc, 1, 0, 0, 0)

	// A rejected expansion asked down to below the old size is granted too.
	in.Spec.Replicas["r-a"] = 70 * Gi
	in.Generation, in.Previous = 5, st
	st, _ = decide(t, in)
	wantReq(t, "replica", st.Replicas, "r-a", rejected(70*Gi, 40*Gi, "expansion from 40Gi to 70Gi needs 30Gi more, 10Gi free of limit 100Gi"))
	in.Spec.Replicas["r-a"] = 1 * Gi
	in.Generation, in.Previous = 6, st
	st, oc = decide(t, in)
	wantReq(t, "replica", st.Replicas, "r-a", granted(1*Gi))
	wantScheduled(t, st, 51*Gi)
	wantOutcome(t, oc, 1, 0, 0, 0)

	// An expansion asked again at a size that fits after a rejection is
	// granted, counted from the held size.
	in.Spec.Replicas["r-a"] = 70 * Gi
	in.Generation, in.Previous = 7, st
	st, _ = decide(t, in)
	wantReq(t, "replica", st.Replicas, "r-a", rejected(70*Gi, 1*Gi, "expansion from 1Gi to 70Gi needs 69Gi more, 49Gi free of limit 100Gi"))
	in.Spec.Replicas["r-a"] = 50 * Gi
	in.Generation, in.Previous = 8, st
	st, oc = decide(t, in)
	wantReq(t, "replica", st.Replicas, "r-a", granted(50*Gi))
	wantScheduled(t, st, 100*Gi)
	wantOutcome(t, oc, 1, 0, 0, 0)
}

func TestDecideRemoval(t *testing.T) {
	expires := t0.Add(time.Minute)
	prev := dsv1.DiskScheduleStatus{
		StorageScheduled: 100 * Gi, StorageLimit: 100 * Gi,
		Replicas: map[string]dsv1.RequestStatus{
			"r-a":      granted(60 * Gi),
			"r-b":      granted(20 * Gi),
			"r-big":    rejected(500*Gi, 0, "requested 500Gi, 20Gi free of limit 100Gi"),
			"r-expand": rejected(30*Gi, 10*Gi, "expansion from 10Gi to 30Gi needs 20Gi more, 0 free of limit 100Gi"),
		},
		BackingImages: map[string]dsv1.RequestStatus{"bi-a": granted(5 * Gi)},
		Reservations: map[string]dsv1.ReservationStatus{
			"v-held":    resScheduled(5*Gi, "ns/p", expires),
			"v-expired": {State: dsv1.ReservationStateExpired, RequestedSize: 7 * Gi, Pod: "ns/q", Message: "expired"},
		},
	}
	full := dsv1.DiskScheduleSpec{
		Replicas:      map[string]rb{"r-a": 60 * Gi, "r-b": 20 * Gi, "r-big": 500 * Gi, "r-expand": 30 * Gi},
		BackingImages: map[string]rb{"bi-a": 5 * Gi},
		Reservations: map[string]dsv1.DiskScheduleReservation{
			"v-held":    {Size: 5 * Gi, Pod: "ns/p"},
			"v-expired": {Size: 7 * Gi, Pod: "ns/q"},
		},
	}
	in := func(mutate func(*dsv1.DiskScheduleSpec)) Input {
		spec := *full.DeepCopy()
		mutate(&spec)
		return Input{Spec: spec, Generation: 9, Previous: prev, Disk: okDisk(100 * Gi), ReservationTimeout: timeout, Now: t0}
	}

	t.Run("removed replica frees its space for a new request in the same decision", func(t *testing.T) {
		st, oc := decide(t, in(func(s *dsv1.DiskScheduleSpec) {
			delete(s.Replicas, "r-a")
			s.Replicas["r-new"] = 60 * Gi
		}))
		if _, ok := st.Replicas["r-a"]; ok {
			t.Errorf("removed r-a still in status")
		}
		wantReq(t, "replica", st.Replicas, "r-new", granted(60*Gi))
		wantScheduled(t, st, 100*Gi)
		wantOutcome(t, oc, 1, 0, 1, 0)
	})
	t.Run("removed rejected entry disappears and frees nothing", func(t *testing.T) {
		st, oc := decide(t, in(func(s *dsv1.DiskScheduleSpec) {
			delete(s.Replicas, "r-big")
			s.Replicas["r-new"] = 1
		}))
		if _, ok := st.Replicas["r-big"]; ok {
			t.Errorf("removed r-big still in status")
		}
		wantReq(t, "replica", st.Replicas, "r-new", rejected(1, 0, "requested 1, 0 free of limit 100Gi"+holding(5*Gi)))
		wantScheduled(t, st, 100*Gi)
		wantOutcome(t, oc, 0, 1, 0, 0)
	})
	t.Run("removed rejected expansion frees the size it kept", func(t *testing.T) {
		st, oc := decide(t, in(func(s *dsv1.DiskScheduleSpec) {
			delete(s.Replicas, "r-expand")
			s.Replicas["r-new"] = 10 * Gi
		}))
		if _, ok := st.Replicas["r-expand"]; ok {
			t.Errorf("removed r-expand still in status")
		}
		wantReq(t, "replica", st.Replicas, "r-new", granted(10*Gi))
		wantScheduled(t, st, 100*Gi)
		wantOutcome(t, oc, 1, 0, 1, 0)
	})
	t.Run("removed backing image and reservations", func(t *testing.T) {
		st, oc := decide(t, in(func(s *dsv1.DiskScheduleSpec) {
			s.BackingImages = nil
			s.Reservations = nil
		}))
		if len(st.BackingImages) != 0 || len(st.Reservations) != 0 {
			t.Errorf("removed entries still in status: %+v %+v", st.BackingImages, st.Reservations)
		}
		wantScheduled(t, st, 90*Gi)
		// bi-a and v-held held space; v-expired held none.
		wantOutcome(t, oc, 0, 0, 2, 0)
		if !oc.NextExpiry.IsZero() {
			t.Errorf("NextExpiry = %v with no reservation left", oc.NextExpiry)
		}
	})
	t.Run("everything removed", func(t *testing.T) {
		st, oc := decide(t, in(func(s *dsv1.DiskScheduleSpec) {
			*s = dsv1.DiskScheduleSpec{}
		}))
		if len(st.Replicas)+len(st.BackingImages)+len(st.Reservations) != 0 {
			t.Errorf("status not empty: %+v", st)
		}
		wantScheduled(t, st, 0)
		wantOutcome(t, oc, 0, 0, 5, 0)
	})
	t.Run("owners the mirror released free their space", func(t *testing.T) {
		// The mirror removes the keys of replicas and backing images that
		// are gone (rule 10); a new request takes their space in the same
		// decision.
		st, oc := decide(t, in(func(s *dsv1.DiskScheduleSpec) {
			delete(s.Replicas, "r-a")
			delete(s.Replicas, "r-big")
			delete(s.BackingImages, "bi-a")
			s.Replicas["r-new"] = 65 * Gi
		}))
		for _, name := range []string{"r-a", "r-big"} {
			if _, ok := st.Replicas[name]; ok {
				t.Errorf("released %s still in status", name)
			}
		}
		if _, ok := st.BackingImages["bi-a"]; ok {
			t.Errorf("released bi-a still in status")
		}
		wantReq(t, "replica", st.Replicas, "r-new", granted(65*Gi))
		wantReq(t, "replica", st.Replicas, "r-b", granted(20*Gi))
		wantScheduled(t, st, 100*Gi)
		wantOutcome(t, oc, 1, 0, 2, 0)
	})
}

// handoffPrev is a disk exactly full: r-a holds 60Gi, a reservation for
// volume v holds 40Gi until t0+5m.
func handoffPrev() dsv1.DiskScheduleStatus {
	return dsv1.DiskScheduleStatus{
		StorageScheduled: 100 * Gi, StorageLimit: 100 * Gi,
		Replicas:     map[string]dsv1.RequestStatus{"r-a": granted(60 * Gi)},
		Reservations: map[string]dsv1.ReservationStatus{"v": resScheduled(40*Gi, "ns/p", t0.Add(timeout))},
	}
}

func fulfilled(size int64, replica string) dsv1.ReservationStatus {
	return dsv1.ReservationStatus{State: dsv1.ReservationStateFulfilled, RequestedSize: size, Pod: "ns/p",
		Replica: replica, Message: "handed over to replica " + replica}
}

func TestDecideHandoff(t *testing.T) {
	for _, tc := range []struct {
		name      string
		limit     int64
		now       time.Time
		rv        int64
		rival     int64
		disk      *Disk
		wantRV    dsv1.RequestStatus
		wantRival dsv1.RequestStatus
		wantV     dsv1.ReservationStatus
		scheduled int64
		granted   int
		rejected  int
		released  int
	}{
		{
			name: "full disk: the named replica takes the reservation, the rival is rejected",
			// "a-rival" sorts before "r-v": were the reservation freed
			// first, the rival would take its space.
			limit: 100 * Gi, now: t0.Add(time.Minute), rv: 40 * Gi, rival: 1,
			wantRV:    granted(40 * Gi),
			wantRival: rejected(1, 0, "requested 1, 0 free of limit 100Gi"),
			wantV:     fulfilled(40*Gi, "r-v"),
			scheduled: 100 * Gi, granted: 1, rejected: 1, released: 1,
		},
		{
			name:  "rival as large as the reservation is rejected too",
			limit: 100 * Gi, now: t0.Add(time.Minute), rv: 40 * Gi, rival: 40 * Gi,
			wantRV:    granted(40 * Gi),
			wantRival: rejected(40*Gi, 0, "requested 40Gi, 0 free of limit 100Gi"),
			wantV:     fulfilled(40*Gi, "r-v"),
			scheduled: 100 * Gi, granted: 1, rejected: 1, released: 1,
		},
		{
			name:  "replica smaller than the reservation: the rest is free for the rival",
			limit: 100 * Gi, now: t0.Add(time.Minute), rv: 30 * Gi, rival: 10 * Gi,
			wantRV:    granted(30 * Gi),
			wantRival: granted(10 * Gi),
			wantV:     fulfilled(40*Gi, "r-v"),
			scheduled: 100 * Gi, granted: 2, released: 1,
		},
		{
			name:  "replica larger than the reservation, the extra fits exactly",
			limit: 110 * Gi, now: t0.Add(time.Minute), rv: 50 * Gi, rival: 1,
			wantRV:    granted(50 * Gi),
			wantRival: rejected(1, 0, "requested 1, 0 free of limit 110Gi"),
			wantV:     fulfilled(40*Gi, "r-v"),
			scheduled: 110 * Gi, granted: 1, rejected: 1, released: 1,
		},
		{
			// r-v needs 1 byte more than the reservation on a full disk:
			// no handoff, r-v decided as a new request, the reservation
			// stays.
			name:  "replica larger than the reservation, the extra does not fit",
			limit: 100 * Gi, now: t0.Add(time.Minute), rv: 40*Gi + 1, rival: 1,
			wantRV:    rejected(40*Gi+1, 0, "requested 42949672961, 0 free of limit 100Gi"),
			wantRival: rejected(1, 0, "requested 1, 0 free of limit 100Gi"+holding(40*Gi)),
			wantV:     resScheduled(40*Gi, "ns/p", t0.Add(timeout)),
			scheduled: 100 * Gi, rejected: 2,
		},
		{
			name:  "handoff at the moment of expiry",
			limit: 100 * Gi, now: t0.Add(timeout), rv: 40 * Gi, rival: 1,
			wantRV:    granted(40 * Gi),
			wantRival: rejected(1, 0, "requested 1, 0 free of limit 100Gi"),
			wantV:     fulfilled(40*Gi, "r-v"),
			scheduled: 100 * Gi, granted: 1, rejected: 1, released: 1,
		},
		{
			name:  "handoff a bit after expiry, in the first decision that sees the replica",
			limit: 100 * Gi, now: t0.Add(timeout + time.Second), rv: 40 * Gi, rival: 1,
			wantRV:    granted(40 * Gi),
			wantRival: rejected(1, 0, "requested 1, 0 free of limit 100Gi"),
			wantV:     fulfilled(40*Gi, "r-v"),
			scheduled: 100 * Gi, granted: 1, rejected: 1, released: 1,
		},
		{
			// At expiry a handoff whose extra does not fit does not keep the
			// reservation alive: it expires in this decision and its space is
			// free for the requests decided after it.
			name:  "at expiry, a handoff that does not fit lets the reservation expire",
			limit: 100 * Gi, now: t0.Add(timeout), rv: 40*Gi + 1, rival: 40 * Gi,
			wantRV:    rejected(40*Gi+1, 0, "requested 42949672961, 0 free of limit 100Gi"),
			wantRival: granted(40 * Gi),
			wantV: dsv1.ReservationStatus{State: dsv1.ReservationStateExpired, RequestedSize: 40 * Gi, Pod: "ns/p",
				Message: "expired at 2025-06-01T12:05:00Z: no replica took over 40Gi"},
			scheduled: 100 * Gi, granted: 1, rejected: 1, released: 1,
		},
		{
			name:  "disk not schedulable: the replica still takes what the reservation holds",
			limit: 100 * Gi, now: t0.Add(time.Minute), rv: 40 * Gi, rival: 1,
			disk:      &Disk{Limit: 100 * Gi, Reason: dsv1.DiskScheduleReasonNodeNotReady, Message: "node n1 is not Ready"},
			wantRV:    granted(40 * Gi),
			wantRival: rejected(1, 0, "disk is not schedulable (NodeNotReady): node n1 is not Ready"),
			wantV:     fulfilled(40*Gi, "r-v"),
			scheduled: 100 * Gi, granted: 1, rejected: 1, released: 1,
		},
		{
			name:  "disk not schedulable: no new space beyond the reservation",
			limit: 200 * Gi, now: t0.Add(time.Minute), rv: 41 * Gi, rival: 1,
			disk:      &Disk{Limit: 200 * Gi, Reason: dsv1.DiskScheduleReasonDiskSchedulingDisabled, Message: "disk d1 has allowScheduling=false"},
			wantRV:    rejected(41*Gi, 0, "disk is not schedulable (DiskSchedulingDisabled): disk d1 has allowScheduling=false"),
			wantRival: rejected(1, 0, "disk is not schedulable (DiskSchedulingDisabled): disk d1 has allowScheduling=false"),
			wantV:     resScheduled(40*Gi, "ns/p", t0.Add(timeout)),
			scheduled: 100 * Gi, rejected: 2,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			disk := okDisk(tc.limit)
			if tc.disk != nil {
				disk = *tc.disk
			}
			spec := dsv1.DiskScheduleSpec{
				Replicas:     map[string]rb{"r-a": 60 * Gi, "a-rival": rb(tc.rival), "r-v": rb(tc.rv)},
				Reservations: map[string]dsv1.DiskScheduleReservation{"v": {Size: 40 * Gi, Pod: "ns/p", Replica: "r-v"}},
			}
			st, oc := decide(t, Input{Spec: spec, Generation: 5, Previous: handoffPrev(), Disk: disk, ReservationTimeout: timeout, Now: tc.now})
			wantReq(t, "replica", st.Replicas, "r-v", tc.wantRV)
			wantReq(t, "replica", st.Replicas, "a-rival", tc.wantRival)
			wantReq(t, "replica", st.Replicas, "r-a", granted(60*Gi))
			wantRes(t, st.Reservations, "v", tc.wantV)
			wantScheduled(t, st, tc.scheduled)
			wantOutcome(t, oc, tc.granted, tc.rejected, tc.released, 0)
			wantNext := time.Time{}
			if tc.wantV.State == dsv1.ReservationStateScheduled {
				wantNext = tc.wantV.ExpiresAt.Time
			}
			if !oc.NextExpiry.Equal(wantNext) {
				t.Errorf("NextExpiry = %v, want %v", oc.NextExpiry, wantNext)
			}
		})
	}
}

func TestDecideNoHandoff(t *testing.T) {
	spec := func() dsv1.DiskScheduleSpec {
		return dsv1.DiskScheduleSpec{
			Replicas:     map[string]rb{"r-a": 60 * Gi, "r-v": 40 * Gi},
			Reservations: map[string]dsv1.DiskScheduleReservation{"v": {Size: 40 * Gi, Pod: "ns/p", Replica: "r-v"}},
		}
	}
	now := t0.Add(time.Minute)
	t.Run("reservation names no replica", func(t *testing.T) {
		s := spec()
		s.Reservations["v"] = dsv1.DiskScheduleReservation{Size: 40 * Gi, Pod: "ns/p"}
		st, _ := decide(t, Input{Spec: s, Generation: 2, Previous: handoffPrev(), Disk: okDisk(100 * Gi), ReservationTimeout: timeout, Now: now})
		wantReq(t, "replica", st.Replicas, "r-v", rejected(40*Gi, 0, "requested 40Gi, 0 free of limit 100Gi"+holding(40*Gi)))
		wantRes(t, st.Reservations, "v", resScheduled(40*Gi, "ns/p", t0.Add(timeout)))
	})
	t.Run("named replica released by the mirror", func(t *testing.T) {
		s := spec()
		delete(s.Replicas, "r-v")
		st, oc := decide(t, Input{Spec: s, Generation: 2, Previous: handoffPrev(), Disk: okDisk(100 * Gi), ReservationTimeout: timeout, Now: now})
		if _, ok := st.Replicas["r-v"]; ok {
			t.Errorf("released r-v in status")
		}
		wantRes(t, st.Reservations, "v", resScheduled(40*Gi, "ns/p", t0.Add(timeout)))
		wantOutcome(t, oc, 0, 0, 0, 0)
	})
	t.Run("named replica already decided", func(t *testing.T) {
		prev := handoffPrev()
		prev.Replicas["r-v"] = rejected(40*Gi, 0, "requested 40Gi, 0 free of limit 100Gi")
		st, _ := decide(t, Input{Spec: spec(), Generation: 2, Previous: prev, Disk: okDisk(100 * Gi), ReservationTimeout: timeout, Now: now})
		wantReq(t, "replica", st.Replicas, "r-v", prev.Replicas["r-v"])
		wantRes(t, st.Reservations, "v", resScheduled(40*Gi, "ns/p", t0.Add(timeout)))
	})
	t.Run("the fulfilled reservation stays fulfilled", func(t *testing.T) {
		st, _ := decide(t, Input{Spec: spec(), Generation: 2, Previous: handoffPrev(), Disk: okDisk(100 * Gi), ReservationTimeout: timeout, Now: now})
		wantRes(t, st.Reservations, "v", fulfilled(40*Gi, "r-v"))
		// Much later, and with r-v removed: still fulfilled, nothing expires.
		s := spec()
		delete(s.Replicas, "r-v")
		st2, oc := decide(t, Input{Spec: s, Generation: 3, Previous: st, Disk: okDisk(100 * Gi), ReservationTimeout: timeout, Now: t0.Add(time.Hour)})
		wantRes(t, st2.Reservations, "v", fulfilled(40*Gi, "r-v"))
		wantScheduled(t, st2, 60*Gi)
		wantOutcome(t, oc, 0, 0, 1, 0)
	})
}

func TestDecideExpiry(t *testing.T) {
	in := Input{
		Spec: dsv1.DiskScheduleSpec{Reservations: map[string]dsv1.DiskScheduleReservation{
			"v-a": {Size: 30 * Gi, Pod: "ns/a"},
		}},
		Generation: 1, Disk: okDisk(100 * Gi), ReservationTimeout: timeout, Now: t0,
	}
	st, oc := decide(t, in)
	wantRes(t, st.Reservations, "v-a", resScheduled(30*Gi, "ns/a", t0.Add(timeout)))
	if !oc.NextExpiry.Equal(t0.Add(timeout)) {
		t.Errorf("NextExpiry = %v, want %v", oc.NextExpiry, t0.Add(timeout))
	}
	wantOutcome(t, oc, 1, 0, 0, 0)

	// A minute later a second reservation is granted until t0+6m; the
	// earliest expiry is still v-a's.
	in.Spec.Reservations["v-b"] = dsv1.DiskScheduleReservation{Size: 70 * Gi, Pod: "ns/b"}
	in.Generation, in.Previous, in.Now = 2, st, t0.Add(time.Minute)
	st, oc = decide(t, in)
	wantRes(t, st.Reservations, "v-a", resScheduled(30*Gi, "ns/a", t0.Add(timeout)))
	wantRes(t, st.Reservations, "v-b", resScheduled(70*Gi, "ns/b", t0.Add(time.Minute+timeout)))
	if !oc.NextExpiry.Equal(t0.Add(timeout)) {
		t.Errorf("NextExpiry = %v, want %v", oc.NextExpiry, t0.Add(timeout))
	}
	wantScheduled(t, st, 100*Gi)

	// One nanosecond before expiry: still held, a new request does not fit.
	in.Spec.Replicas = map[string]rb{"r-x": 30 * Gi}
	in.Generation, in.Previous, in.Now = 3, st, t0.Add(timeout-1)
	before, oc := decide(t, in)
	wantRes(t, before.Reservations, "v-a", resScheduled(30*Gi, "ns/a", t0.Add(timeout)))
	wantReq(t, "replica", before.Replicas, "r-x", rejected(30*Gi, 0, "requested 30Gi, 0 free of limit 100Gi"+holding(100*Gi)))
	wantOutcome(t, oc, 0, 1, 0, 0)

	// At expiresAt: v-a expires, frees 30Gi in this decision, and a new
	// request of exactly that size is granted.
	in.Spec.Replicas = map[string]rb{"r-y": 30 * Gi}
	in.Generation, in.Now = 4, t0.Add(timeout)
	st, oc = decide(t, in)
	wantRes(t, st.Reservations, "v-a", dsv1.ReservationStatus{State: dsv1.ReservationStateExpired, RequestedSize: 30 * Gi,
		Pod: "ns/a", Message: "expired at 2025-06-01T12:05:00Z: no replica took over 30Gi"})
	wantReq(t, "replica", st.Replicas, "r-y", granted(30*Gi))
	wantRes(t, st.Reservations, "v-b", resScheduled(70*Gi, "ns/b", t0.Add(time.Minute+timeout)))
	wantScheduled(t, st, 100*Gi)
	wantOutcome(t, oc, 1, 0, 1, 0)
	if !oc.NextExpiry.Equal(t0.Add(time.Minute + timeout)) {
		t.Errorf("NextExpiry = %v, want %v", oc.NextExpiry, t0.Add(time.Minute+timeout))
	}

	// Later: both expired, nothing left to expire, expired stays expired.
	in.Generation, in.Previous, in.Now = 5, st, t0.Add(time.Hour)
	st, oc = decide(t, in)
	for _, v := range []string{"v-a", "v-b"} {
		if got := st.Reservations[v]; got.State != dsv1.ReservationStateExpired || got.ScheduledSize != 0 || got.ExpiresAt != nil {
			t.Errorf("%s = %+v, want expired", v, got)
		}
	}
	wantScheduled(t, st, 30*Gi)
	wantOutcome(t, oc, 0, 0, 1, 0)
	if !oc.NextExpiry.IsZero() {
		t.Errorf("NextExpiry = %v, want zero", oc.NextExpiry)
	}
}

func TestDecideReservationRewrittenForAnotherPod(t *testing.T) {
	expires := t0.Add(timeout)
	for _, tc := range []struct {
		name string
		prev dsv1.ReservationStatus
	}{
		{"scheduled", resScheduled(40*Gi, "ns/p1", expires)},
		{"expired", dsv1.ReservationStatus{State: dsv1.ReservationStateExpired, RequestedSize: 40 * Gi, Pod: "ns/p1"}},
		{"rejected", dsv1.ReservationStatus{State: dsv1.ReservationStateRejected, RequestedSize: 40 * Gi, Pod: "ns/p1", Message: "requested 40Gi, 0 free of limit 100Gi"}},
		{"fulfilled", dsv1.ReservationStatus{State: dsv1.ReservationStateFulfilled, RequestedSize: 40 * Gi, Pod: "ns/p1", Replica: "r-old"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prev := dsv1.DiskScheduleStatus{
				StorageLimit: 100 * Gi, StorageScheduled: 60*Gi + tc.prev.ScheduledSize,
				Replicas:     map[string]dsv1.RequestStatus{"r-a": granted(60 * Gi)},
				Reservations: map[string]dsv1.ReservationStatus{"v": tc.prev},
			}
			spec := dsv1.DiskScheduleSpec{
				Replicas:     map[string]rb{"r-a": 60 * Gi},
				Reservations: map[string]dsv1.DiskScheduleReservation{"v": {Size: 40 * Gi, Pod: "ns/p2"}},
			}
			now := t0.Add(2 * time.Minute)
			st, oc := decide(t, Input{Spec: spec, Generation: 4, Previous: prev, Disk: okDisk(100 * Gi), ReservationTimeout: timeout, Now: now})
			wantRes(t, st.Reservations, "v", resScheduled(40*Gi, "ns/p2", now.Add(timeout)))
			wantScheduled(t, st, 100*Gi)
			wantOutcome(t, oc, 1, 0, 0, 0)
			if !oc.NextExpiry.Equal(now.Add(timeout)) {
				t.Errorf("NextExpiry = %v, want %v", oc.NextExpiry, now.Add(timeout))
			}
		})
	}
	t.Run("same pod, same size: not decided again", func(t *testing.T) {
		prev := dsv1.DiskScheduleStatus{StorageLimit: 100 * Gi,
			Reservations: map[string]dsv1.ReservationStatus{"v": {State: dsv1.ReservationStateRejected, RequestedSize: 40 * Gi, Pod: "ns/p1", Message: "old"}}}
		spec := dsv1.DiskScheduleSpec{Reservations: map[string]dsv1.DiskScheduleReservation{"v": {Size: 40 * Gi, Pod: "ns/p1"}}}
		st, oc := decide(t, Input{Spec: spec, Generation: 4, Previous: prev, Disk: okDisk(100 * Gi), ReservationTimeout: timeout, Now: t0})
		wantRes(t, st.Reservations, "v", prev.Reservations["v"])
		wantOutcome(t, oc, 0, 0, 0, 0)
	})
}

func TestDecideAdoption(t *testing.T) {
	running := map[string]bool{"r-a": true, "r-b": true}
	in := Input{
		Spec:       dsv1.DiskScheduleSpec{Replicas: map[string]rb{"r-a": 80 * Gi, "r-b": 50 * Gi, "r-c": 1 * Gi}},
		Generation: 1, Disk: okDisk(100 * Gi), Persisted: Owners{Replicas: running}, ReservationTimeout: timeout, Now: t0,
	}
	adopted := func(size int64) dsv1.RequestStatus {
		st := granted(size)
		st.Message = "adopted: Longhorn already persisted the replica on this disk"
		return st
	}
	st, oc := decide(t, in)
	wantReq(t, "replica", st.Replicas, "r-a", adopted(80*Gi))
	wantReq(t, "replica", st.Replicas, "r-b", adopted(50*Gi))
	wantReq(t, "replica", st.Replicas, "r-c", rejected(1*Gi, 0, "requested 1Gi, 0 free of limit 100Gi"))
	wantScheduled(t, st, 130*Gi)
	wantOutcome(t, oc, 2, 1, 0, 2)
	wantCondition(t, st, dsv1.DiskScheduleConditionOvercommitted, metav1.ConditionTrue, dsv1.DiskScheduleReasonAdoptedOverLimit, "130Gi", "100Gi")
	wantCondition(t, st, dsv1.DiskScheduleConditionReady, metav1.ConditionTrue, dsv1.DiskScheduleReasonSchedulable)

	// Growth of an adopted replica is rejected while over the limit.
	in.Spec.Replicas["r-a"] = 81 * Gi
	in.Generation, in.Previous = 2, st
	st, oc = decide(t, in)
	wantReq(t, "replica", st.Replicas, "r-a", rejected(81*Gi, 80*Gi, "expansion from 80Gi to 81Gi needs 1Gi more, 0 free of limit 100Gi"))
	wantScheduled(t, st, 130*Gi)
	wantOutcome(t, oc, 0, 1, 0, 0)
	wantCondition(t, st, dsv1.DiskScheduleConditionOvercommitted, metav1.ConditionTrue, dsv1.DiskScheduleReasonAdoptedOverLimit)

	// r-b shrinks: usage exactly at the limit, no longer overcommitted, but
	// there is still no room to grow.
	in.Spec.Replicas["r-b"] = 20 * Gi
	in.Spec.Replicas["r-a"] = 82 * Gi
	in.Generation, in.Previous = 3, st
	st, oc = decide(t, in)
	wantReq(t, "replica", st.Replicas, "r-b", granted(20*Gi))
	wantReq(t, "replica", st.Replicas, "r-a", rejected(82*Gi, 80*Gi, "expansion from 80Gi to 82Gi needs 2Gi more, 0 free of limit 100Gi"))
	wantScheduled(t, st, 100*Gi)
	wantOutcome(t, oc, 1, 1, 0, 0)
	wantCondition(t, st, dsv1.DiskScheduleConditionOvercommitted, metav1.ConditionFalse, dsv1.DiskScheduleReasonWithinLimit, "100Gi scheduled of limit 100Gi")

	// r-b removed: usage below the limit, growth granted again.
	delete(in.Spec.Replicas, "r-b")
	in.Spec.Replicas["r-a"] = 90 * Gi
	in.Generation, in.Previous = 4, st
	st, oc = decide(t, in)
	wantReq(t, "replica", st.Replicas, "r-a", granted(90*Gi))
	wantScheduled(t, st, 90*Gi)
	wantOutcome(t, oc, 1, 0, 1, 0)
	wantCondition(t, st, dsv1.DiskScheduleConditionOvercommitted, metav1.ConditionFalse, dsv1.DiskScheduleReasonWithinLimit, "90Gi scheduled of limit 100Gi")

	// A running replica that already has a decision is not adopted again.
	in.Spec.Replicas["r-a"] = 200 * Gi
	in.Generation, in.Previous = 5, st
	st, oc = decide(t, in)
	wantReq(t, "replica", st.Replicas, "r-a", rejected(200*Gi, 90*Gi, "expansion from 90Gi to 200Gi needs 110Gi more, 10Gi free of limit 100Gi"))
	wantOutcome(t, oc, 0, 1, 0, 0)
}

func TestDecideAdoptionOnUnschedulableDisk(t *testing.T) {
	// A replica that already runs holds its space whatever the disk's state.
	st, oc := decide(t, Input{
		Spec:       dsv1.DiskScheduleSpec{Replicas: map[string]rb{"r-a": 10 * Gi, "r-b": 10 * Gi}},
		Generation: 1, Persisted: Owners{Replicas: map[string]bool{"r-a": true}},
		Disk:               Disk{Limit: 5 * Gi, Reason: dsv1.DiskScheduleReasonNodeNotReady, Message: "node n1 is not Ready"},
		ReservationTimeout: timeout, Now: t0,
	})
	if got := st.Replicas["r-a"]; got.State != dsv1.RequestStateScheduled || got.ScheduledSize != 10*Gi {
		t.Errorf("r-a = %+v, want adopted", got)
	}
	wantReq(t, "replica", st.Replicas, "r-b", rejected(10*Gi, 0, "disk is not schedulable (NodeNotReady): node n1 is not Ready"))
	wantOutcome(t, oc, 1, 1, 0, 1)
	wantCondition(t, st, dsv1.DiskScheduleConditionOvercommitted, metav1.ConditionTrue, dsv1.DiskScheduleReasonAdoptedOverLimit)
	wantCondition(t, st, dsv1.DiskScheduleConditionReady, metav1.ConditionFalse, dsv1.DiskScheduleReasonNodeNotReady, "node n1 is not Ready")
}

func TestDecideUnschedulable(t *testing.T) {
	prev := dsv1.DiskScheduleStatus{
		StorageScheduled: 50 * Gi, StorageLimit: 100 * Gi,
		Replicas: map[string]dsv1.RequestStatus{"r-a": granted(30 * Gi), "r-b": granted(10 * Gi), "r-d": granted(10 * Gi)},
	}
	spec := dsv1.DiskScheduleSpec{
		Replicas:      map[string]rb{"r-a": 30 * Gi, "r-b": 5 * Gi, "r-c": 10 * Gi, "r-d": 20 * Gi},
		BackingImages: map[string]rb{"bi-x": 1},
		Reservations:  map[string]dsv1.DiskScheduleReservation{"v": {Size: 1 * Gi, Pod: "ns/p"}},
	}
	for _, tc := range []struct{ reason, message string }{
		{dsv1.DiskScheduleReasonDiskNotFound, "node n1 has no disk d1"},
		{dsv1.DiskScheduleReasonNodeNotReady, "node n1 is not Ready"},
		{dsv1.DiskScheduleReasonNodeUnschedulable, "node n1 is cordoned"},
		{dsv1.DiskScheduleReasonNodeSchedulingDisabled, "node n1 has allowScheduling=false"},
		{dsv1.DiskScheduleReasonNodeEvictionRequested, "eviction requested for node n1"},
		{dsv1.DiskScheduleReasonDiskSchedulingDisabled, "disk d1 has allowScheduling=false"},
		{dsv1.DiskScheduleReasonDiskEvictionRequested, "eviction requested for disk d1"},
		{dsv1.DiskScheduleReasonDiskNotReady, "disk d1 is not Ready"},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			disk := Disk{Limit: 100 * Gi, Schedulable: false, Reason: tc.reason, Message: tc.message}
			st, oc := decide(t, Input{Spec: spec, Generation: 6, Previous: prev, Disk: disk, ReservationTimeout: timeout, Now: t0})
			msg := "disk is not schedulable (" + tc.reason + "): " + tc.message
			wantReq(t, "replica", st.Replicas, "r-a", granted(30*Gi))
			wantReq(t, "replica", st.Replicas, "r-b", granted(5*Gi))
			wantReq(t, "replica", st.Replicas, "r-c", rejected(10*Gi, 0, msg))
			// Growth of what is placed is judged on space alone (rule 8).
			wantReq(t, "replica", st.Replicas, "r-d", granted(20*Gi))
			wantReq(t, "backing image", st.BackingImages, "bi-x", rejected(1, 0, msg))
			wantRes(t, st.Reservations, "v", dsv1.ReservationStatus{State: dsv1.ReservationStateRejected, RequestedSize: 1 * Gi, Pod: "ns/p", Message: msg})
			wantScheduled(t, st, 55*Gi)
			wantOutcome(t, oc, 2, 3, 0, 0)
			wantCondition(t, st, dsv1.DiskScheduleConditionReady, metav1.ConditionFalse, tc.reason, tc.message)
			if c := meta.FindStatusCondition(st.Conditions, dsv1.DiskScheduleConditionReady); c.Message != tc.message || !c.LastTransitionTime.Time.Equal(t0) {
				t.Errorf("Ready condition %+v", c)
			}
			wantCondition(t, st, dsv1.DiskScheduleConditionOvercommitted, metav1.ConditionFalse, dsv1.DiskScheduleReasonWithinLimit)
		})
	}
}

func TestDecideConditions(t *testing.T) {
	spec := dsv1.DiskScheduleSpec{Replicas: map[string]rb{"r-a": 10 * Gi}}
	st, _ := decide(t, Input{Spec: spec, Generation: 7, Disk: okDisk(100 * Gi), ReservationTimeout: timeout, Now: t0})
	if st.ObservedGeneration != 7 {
		t.Errorf("observedGeneration = %d, want 7", st.ObservedGeneration)
	}
	wantCondition(t, st, dsv1.DiskScheduleConditionReady, metav1.ConditionTrue, dsv1.DiskScheduleReasonSchedulable)
	wantCondition(t, st, dsv1.DiskScheduleConditionOvercommitted, metav1.ConditionFalse, dsv1.DiskScheduleReasonWithinLimit, "10Gi scheduled of limit 100Gi")
	if len(st.Conditions) != 2 {
		t.Errorf("conditions = %+v, want Ready and Overcommitted", st.Conditions)
	}

	// Same state later, higher generation: the generation moves, the
	// transition time does not.
	t1 := t0.Add(time.Hour)
	st2, _ := decide(t, Input{Spec: spec, Generation: 8, Previous: st, Disk: okDisk(100 * Gi), ReservationTimeout: timeout, Now: t1})
	for _, c := range st2.Conditions {
		if c.ObservedGeneration != 8 {
			t.Errorf("condition %s observedGeneration = %d, want 8", c.Type, c.ObservedGeneration)
		}
		if !c.LastTransitionTime.Time.Equal(t0) {
			t.Errorf("condition %s lastTransitionTime = %v, want %v (unchanged)", c.Type, c.LastTransitionTime, t0)
		}
	}

	// Ready flips: its transition time moves.
	st3, _ := decide(t, Input{Spec: spec, Generation: 9, Previous: st2,
		Disk: Disk{Limit: 100 * Gi, Reason: dsv1.DiskScheduleReasonDiskNotReady, Message: "disk d1 is not Ready"}, ReservationTimeout: timeout, Now: t1})
	ready := meta.FindStatusCondition(st3.Conditions, dsv1.DiskScheduleConditionReady)
	if ready.Status != metav1.ConditionFalse || !ready.LastTransitionTime.Time.Equal(t1) || ready.ObservedGeneration != 9 {
		t.Errorf("Ready = %+v, want False since %v at generation 9", ready, t1)
	}
	// Conditions the ledger does not own are kept.
	st3.Conditions = append(st3.Conditions, metav1.Condition{Type: "Other", Status: metav1.ConditionTrue, Reason: "X", LastTransitionTime: metav1.NewTime(t0)})
	st4, _ := decide(t, Input{Spec: spec, Generation: 10, Previous: st3, Disk: okDisk(100 * Gi), ReservationTimeout: timeout, Now: t1})
	if meta.FindStatusCondition(st4.Conditions, "Other") == nil {
		t.Errorf("foreign condition dropped: %+v", st4.Conditions)
	}
}

func TestDecideEmpty(t *testing.T) {
	st, oc := decide(t, Input{Generation: 1, Disk: okDisk(0), ReservationTimeout: timeout, Now: t0})
	wantScheduled(t, st, 0)
	wantOutcome(t, oc, 0, 0, 0, 0)
	if len(st.Replicas)+len(st.BackingImages)+len(st.Reservations) != 0 || !oc.NextExpiry.IsZero() {
		t.Errorf("empty spec gave %+v %+v", st, oc)
	}
}

// ledgerModel drives Decide through a random sequence of spec mutations, the
// way requesters and the controller would: each decision's status is the
// next decision's Previous.
type ledgerModel struct {
	t   *testing.T
	rng *rand.Rand
	// strict sequences never adopt and never lower the limit, so
	// storageScheduled ≤ storageLimit must hold after every step.
	strict bool

	spec    dsv1.DiskScheduleSpec
	status  dsv1.DiskScheduleStatus
	disk    Disk
	now     time.Time
	gen     int64
	running map[string]bool
	outcome Outcome
	step    int
	pods    int

	// Over the whole sequence.
	adopted, lowered                   bool
	handoffs, expiries, overLimitSteps int
	grants, rejections, releases       int
}

var (
	replicaPool = poolOf("r", 14)
	imagePool   = poolOf("bi", 5)
	volumePool  = poolOf("vol", 8)
)

func poolOf(prefix string, n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%02d", prefix, i)
	}
	return names
}

func (m *ledgerModel) size() int64 {
	n := (m.rng.Int64N(30) + 1) * Gi
	switch m.rng.IntN(6) {
	case 0:
		n += m.rng.Int64N(3) - 1 // a byte either side
	case 1:
		n = m.rng.Int64N(4) + 1 // a few bytes
	}
	return max(n, 1)
}

func pick[V any](rng *rand.Rand, m map[string]V) (string, bool) {
	if len(m) == 0 {
		return "", false
	}
	keys := sortedKeys(m)
	return keys[rng.IntN(len(keys))], true
}

func pickFree(rng *rand.Rand, pool []string, taken func(string) bool) (string, bool) {
	var free []string
	for _, n := range pool {
		if !taken(n) {
			free = append(free, n)
		}
	}
	if len(free) == 0 {
		return "", false
	}
	return free[rng.IntN(len(free))], true
}

// namedByReservation reports whether a spec reservation names replica r.
func (m *ledgerModel) namedByReservation(r string) bool {
	for _, res := range m.spec.Reservations {
		if res.Replica == r {
			return true
		}
	}
	return false
}

func (m *ledgerModel) replicaTaken(r string) bool {
	_, inSpec := m.spec.Replicas[r]
	return inSpec || m.namedByReservation(r)
}

func (m *ledgerModel) resize(cur int64, grow bool) int64 {
	if grow {
		switch m.rng.IntN(3) {
		case 0:
			return cur + 1
		default:
			return cur + m.size()
		}
	}
	if cur <= 1 {
		return cur
	}
	switch m.rng.IntN(3) {
	case 0:
		return cur - 1
	default:
		return max(1, cur-m.rng.Int64N(cur))
	}
}

func (m *ledgerModel) mutate() {
	rng := m.rng
	switch op := rng.IntN(24); op {
	case 0, 1: // add a replica
		if r, ok := pickFree(rng, replicaPool, m.replicaTaken); ok {
			m.spec.Replicas[r] = rb(m.size())
		}
	case 2, 3: // grow a replica
		if r, ok := pick(rng, m.spec.Replicas); ok {
			m.spec.Replicas[r] = rb(m.resize(int64(m.spec.Replicas[r]), true))
		}
	case 4: // shrink a replica
		if r, ok := pick(rng, m.spec.Replicas); ok {
			m.spec.Replicas[r] = rb(m.resize(int64(m.spec.Replicas[r]), false))
		}
	case 5: // remove a replica
		if r, ok := pick(rng, m.spec.Replicas); ok {
			delete(m.spec.Replicas, r)
			delete(m.running, r)
		}
	case 6: // add a backing image
		if b, ok := pickFree(rng, imagePool, func(b string) bool {
			_, in := m.spec.BackingImages[b]
			return in
		}); ok {
			m.spec.BackingImages[b] = rb(m.size())
		}
	case 7: // resize a backing image
		if b, ok := pick(rng, m.spec.BackingImages); ok {
			m.spec.BackingImages[b] = rb(m.resize(int64(m.spec.BackingImages[b]), rng.IntN(2) == 0))
		}
	case 8: // remove a backing image
		if b, ok := pick(rng, m.spec.BackingImages); ok {
			delete(m.spec.BackingImages, b)
		}
	case 9, 10: // add a reservation
		if v, ok := pickFree(rng, volumePool, func(v string) bool { _, in := m.spec.Reservations[v]; return in }); ok {
			m.pods++
			m.spec.Reservations[v] = dsv1.DiskScheduleReservation{Size: m.size(), Pod: fmt.Sprintf("ns/pod-%d", m.pods)}
		}
	case 11: // remove a reservation
		if v, ok := pick(rng, m.spec.Reservations); ok {
			delete(m.spec.Reservations, v)
		}
	case 12: // re-write a reservation for another pod, sometimes resized
		if v, ok := pick(rng, m.spec.Reservations); ok {
			res := m.spec.Reservations[v]
			m.pods++
			res.Pod = fmt.Sprintf("ns/pod-%d", m.pods)
			if rng.IntN(2) == 0 {
				res.Size = m.size()
			}
			res.Replica = ""
			m.spec.Reservations[v] = res
		}
	case 13, 14: // hand a granted reservation over to a new replica request
		var candidates []string
		for _, v := range sortedKeys(m.spec.Reservations) {
			if m.spec.Reservations[v].Replica == "" && m.status.Reservations[v].State == dsv1.ReservationStateScheduled &&
				reservationDecided(m.spec.Reservations[v], m.status.Reservations[v]) {
				candidates = append(candidates, v)
			}
		}
		if len(candidates) == 0 {
			return
		}
		v := candidates[rng.IntN(len(candidates))]
		r, ok := pickFree(rng, replicaPool, m.replicaTaken)
		if !ok {
			return
		}
		res := m.spec.Reservations[v]
		size := res.Size
		switch rng.IntN(5) {
		case 0:
			size++
		case 1:
			size = max(1, size-1)
		case 2:
			size += m.size()
		case 3:
			size = max(1, size-m.rng.Int64N(size))
		}
		res.Replica = r
		m.spec.Reservations[v] = res
		m.spec.Replicas[r] = rb(size)
	case 15, 16: // time passes: sometimes exactly to the next expiry, or just before it
		switch {
		case !m.outcome.NextExpiry.IsZero() && rng.IntN(2) == 0:
			m.now = m.outcome.NextExpiry
		case !m.outcome.NextExpiry.IsZero() && rng.IntN(2) == 0:
			m.now = m.outcome.NextExpiry.Add(-time.Nanosecond)
		default:
			m.now = m.now.Add(time.Duration(rng.Int64N(int64(timeout))))
		}
	case 17: // the limit changes
		limit := m.disk.Limit
		switch rng.IntN(6) {
		case 0:
			limit += 1
		case 1:
			limit += m.size()
		case 2:
			limit = max(0, limit-m.size())
		case 3:
			limit = max(0, limit-1)
		case 4:
			if rng.IntN(4) == 0 {
				limit = 0
			}
		case 5: // back to an everyday size, so the walk does not drift away
			limit = (rng.Int64N(100) + 20) * Gi
		}
		if limit < m.disk.Limit {
			if m.strict {
				return
			}
			if limit < m.status.StorageScheduled {
				m.lowered = true
			}
		}
		m.disk.Limit = limit
	case 18: // schedulability flips
		if m.disk.Schedulable && rng.IntN(2) == 0 {
			m.disk.Schedulable, m.disk.Reason, m.disk.Message = false, dsv1.DiskScheduleReasonNodeNotReady, "node n1 is not Ready"
		} else {
			m.disk.Schedulable, m.disk.Reason, m.disk.Message = true, dsv1.DiskScheduleReasonSchedulable, "disk is schedulable"
		}
	case 19, 20: // an owner disappears: the mirror removes its key (rule 10)
		if rng.IntN(2) == 0 {
			if r, ok := pick(rng, m.spec.Replicas); ok {
				delete(m.spec.Replicas, r)
				delete(m.running, r)
			}
		} else if b, ok := pick(rng, m.spec.BackingImages); ok {
			delete(m.spec.BackingImages, b)
		}
	case 21: // adoption: a replica that already runs here is written to the ledger
		if m.strict || rng.IntN(3) != 0 {
			return
		}
		if r, ok := pickFree(rng, replicaPool, m.replicaTaken); ok {
			m.spec.Replicas[r] = rb(m.size())
			m.running[r] = true
		}
	case 22, 23: // requesters give up on rejections: a new request is withdrawn, an expansion taken back
		for _, r := range sortedKeys(m.status.Replicas) {
			st := m.status.Replicas[r]
			if st.State != dsv1.RequestStateRejected || int64(m.spec.Replicas[r]) != st.RequestedSize || rng.IntN(2) == 0 {
				continue
			}
			if st.ScheduledSize == 0 {
				delete(m.spec.Replicas, r)
			} else {
				m.spec.Replicas[r] = rb(st.ScheduledSize)
			}
		}
		for _, b := range sortedKeys(m.status.BackingImages) {
			st := m.status.BackingImages[b]
			if st.State == dsv1.RequestStateRejected && int64(m.spec.BackingImages[b]) == st.RequestedSize && rng.IntN(2) == 0 {
				delete(m.spec.BackingImages, b)
			}
		}
		for _, v := range sortedKeys(m.status.Reservations) {
			if m.status.Reservations[v].State == dsv1.ReservationStateRejected && rng.IntN(2) == 0 {
				delete(m.spec.Reservations, v)
			}
		}
	}
}

func (m *ledgerModel) input() Input {
	running := map[string]bool{}
	for k, v := range m.running {
		running[k] = v
	}
	return Input{
		Spec: *m.spec.DeepCopy(), Generation: m.gen, Previous: *m.status.DeepCopy(),
		Disk: m.disk, Persisted: Owners{Replicas: running}, ReservationTimeout: timeout, Now: m.now,
	}
}

func (m *ledgerModel) fail(format string, args ...any) {
	m.t.Helper()
	m.t.Fatalf("step %d (generation %d, now %s, limit %d, schedulable %v): %s\nspec %+v\nprevious %+v",
		m.step, m.gen, m.now.Format(time.RFC3339Nano), m.disk.Limit, m.disk.Schedulable, fmt.Sprintf(format, args...), m.spec, m.status)
}

// decide runs one decision and checks every property of it.
func (m *ledgerModel) decide() {
	m.t.Helper()
	m.gen++
	in := m.input()
	prev := in.Previous
	out, oc := Decide(in)

	// Deterministic, and the input is left alone.
	if again, oc2 := Decide(m.input()); !reflect.DeepEqual(out, again) || !reflect.DeepEqual(oc, oc2) {
		m.fail("not deterministic:\n%+v\n%+v", out, again)
	}
	if !reflect.DeepEqual(in.Spec, m.spec) || !reflect.DeepEqual(in.Previous, m.status) {
		m.fail("Decide changed its input")
	}

	// The ledger's invariant holds; limit and generation recorded.
	if v := Violation(out); v != "" {
		m.fail("invariant broken: %s: %+v", v, out)
	}
	if out.StorageLimit != m.disk.Limit || out.ObservedGeneration != m.gen {
		m.fail("storageLimit %d observedGeneration %d", out.StorageLimit, out.ObservedGeneration)
	}

	// The limit (rule 2): never exceeded by new grants.
	used, limit := out.StorageScheduled, m.disk.Limit
	if oc.Adopted > 0 {
		m.adopted = true
	}
	if m.strict && used > limit {
		m.fail("strict sequence: storageScheduled %d over limit %d: %+v", used, limit, out)
	}
	if !m.adopted && !m.lowered && used > limit {
		m.fail("storageScheduled %d over limit %d without adoption or a lowered limit", used, limit)
	}
	if oc.Adopted == 0 && used > limit && used > prev.StorageScheduled {
		m.fail("storageScheduled grew from %d to %d over the limit %d without adoption", prev.StorageScheduled, used, limit)
	}
	if used > limit {
		m.overLimitSteps++
	} else {
		m.lowered = false
		m.adopted = false
	}

	// Conditions.
	over := meta.FindStatusCondition(out.Conditions, dsv1.DiskScheduleConditionOvercommitted)
	ready := meta.FindStatusCondition(out.Conditions, dsv1.DiskScheduleConditionReady)
	if over == nil || ready == nil || over.ObservedGeneration != m.gen || ready.ObservedGeneration != m.gen {
		m.fail("conditions %+v", out.Conditions)
	}
	if (over.Status == metav1.ConditionTrue) != (used > limit) {
		m.fail("Overcommitted %s with %d of %d", over.Status, used, limit)
	}
	if (ready.Status == metav1.ConditionTrue) != m.disk.Schedulable || ready.Reason != m.disk.Reason {
		m.fail("Ready %s/%s, disk %+v", ready.Status, ready.Reason, m.disk)
	}

	newGrants, newRejections, released, adopted := 0, 0, 0, 0
	count := func(st dsv1.RequestStatus) {
		if st.State == dsv1.RequestStateScheduled {
			newGrants++
		} else {
			newRejections++
		}
	}

	// Every spec key has a status entry, every status entry a spec key, and
	// each entry is well formed.
	checkRequests := func(kind string, spec map[string]rb, status, previous map[string]dsv1.RequestStatus) {
		for name, size := range spec {
			st, ok := status[name]
			if !ok {
				m.fail("%s %s: in spec, no status", kind, name)
			}
			if st.RequestedSize != int64(size) {
				m.fail("%s %s: requestedSize %d, spec %d", kind, name, st.RequestedSize, size)
			}
			switch st.State {
			case dsv1.RequestStateScheduled:
				if st.ScheduledSize != st.RequestedSize {
					m.fail("%s %s: scheduled %+v", kind, name, st)
				}
			case dsv1.RequestStateRejected:
				if st.ScheduledSize >= st.RequestedSize || st.ScheduledSize < 0 || st.Message == "" {
					m.fail("%s %s: rejected %+v", kind, name, st)
				}
			default:
				m.fail("%s %s: state %q", kind, name, st.State)
			}
			p, had := previous[name]
			if had && p.RequestedSize == int64(size) {
				// An unchanged request keeps its decision.
				if !reflect.DeepEqual(p, st) {
					m.fail("%s %s: unchanged request re-decided: %+v -> %+v", kind, name, p, st)
				}
				continue
			}
			// A new decision.
			count(st)
			if had && st.State == dsv1.RequestStateRejected && st.ScheduledSize != p.ScheduledSize {
				m.fail("%s %s: rejected change lost the granted size: %+v -> %+v", kind, name, p, st)
			}
			if had && int64(size) <= p.ScheduledSize && st.State != dsv1.RequestStateScheduled {
				m.fail("%s %s: shrink not granted: %+v -> %+v", kind, name, p, st)
			}
			// Rule 8: a disk that is not schedulable takes no new placement;
			// growth of what is placed there is judged on space alone.
			if !m.disk.Schedulable && st.State == dsv1.RequestStateScheduled && neverGranted(p, had) &&
				!(kind == "replica" && (in.Persisted.Replicas[name] || m.handedOff(name, out))) {
				m.fail("%s %s: granted a new placement on a disk that is not schedulable: %+v", kind, name, st)
			}
			if !m.disk.Schedulable && st.State == dsv1.RequestStateRejected && !neverGranted(p, had) && strings.Contains(st.Message, "not schedulable") {
				m.fail("%s %s: growth of what is placed refused for the disk's schedulability: %+v", kind, name, st)
			}
			if kind == "replica" && neverGranted(p, had) && in.Persisted.Replicas[name] {
				adopted++
			}
		}
		for name, st := range status {
			if _, ok := spec[name]; !ok {
				m.fail("%s %s: status %+v without a spec key", kind, name, st)
			}
		}
		for name, p := range previous {
			if _, ok := status[name]; !ok && p.ScheduledSize > 0 {
				released++
			}
		}
	}
	checkRequests("replica", m.spec.Replicas, out.Replicas, prev.Replicas)
	checkRequests("backing image", m.spec.BackingImages, out.BackingImages, prev.BackingImages)

	var nextExpiry time.Time
	for v, res := range m.spec.Reservations {
		st, ok := out.Reservations[v]
		if !ok {
			m.fail("reservation %s: in spec, no status", v)
		}
		if st.RequestedSize != res.Size || st.Pod != res.Pod {
			m.fail("reservation %s: status %+v for spec %+v", v, st, res)
		}
		switch st.State {
		case dsv1.ReservationStateScheduled:
			if st.ScheduledSize != st.RequestedSize || st.ExpiresAt == nil || !m.now.Before(st.ExpiresAt.Time) {
				m.fail("reservation %s: scheduled %+v (expiresAt %v) at %v", v, st, st.ExpiresAt, m.now)
			}
			if nextExpiry.IsZero() || st.ExpiresAt.Time.Before(nextExpiry) {
				nextExpiry = st.ExpiresAt.Time
			}
		case dsv1.ReservationStateRejected, dsv1.ReservationStateExpired, dsv1.ReservationStateFulfilled:
			if st.ScheduledSize != 0 || st.ExpiresAt != nil {
				m.fail("reservation %s: %+v holds space", v, st)
			}
		default:
			m.fail("reservation %s: state %q", v, st.State)
		}
		p, had := prev.Reservations[v]
		if !had || !reservationDecided(res, p) {
			// A new decision.
			switch st.State {
			case dsv1.ReservationStateScheduled:
				newGrants++
				if !st.ExpiresAt.Time.Equal(m.now.Add(timeout)) {
					m.fail("reservation %s: granted until %v, want now+timeout", v, st.ExpiresAt)
				}
			case dsv1.ReservationStateRejected:
				newRejections++
			default:
				m.fail("reservation %s: newly decided as %s", v, st.State)
			}
			continue
		}
		switch {
		case reflect.DeepEqual(p, st):
		case p.State == dsv1.ReservationStateScheduled && st.State == dsv1.ReservationStateExpired:
			if m.now.Before(p.ExpiresAt.Time) {
				m.fail("reservation %s expired early: %v < %v", v, m.now, p.ExpiresAt)
			}
			released++
			m.expiries++
		case p.State == dsv1.ReservationStateScheduled && st.State == dsv1.ReservationStateFulfilled:
			r := res.Replica
			rs, ok := out.Replicas[r]
			if r == "" || st.Replica != r || !ok || rs.State != dsv1.RequestStateScheduled {
				m.fail("reservation %s fulfilled by %q, replica status %+v", v, st.Replica, rs)
			}
			if pr, had := prev.Replicas[r]; had && pr.RequestedSize == rs.RequestedSize {
				m.fail("reservation %s handed to replica %s that was decided before", v, r)
			}
			released++
			m.handoffs++
		default:
			m.fail("reservation %s: %+v -> %+v", v, p, st)
		}
	}
	for v, st := range out.Reservations {
		if _, ok := m.spec.Reservations[v]; !ok {
			m.fail("reservation %s: status %+v without a spec key", v, st)
		}
	}
	for v, p := range prev.Reservations {
		if _, ok := out.Reservations[v]; !ok && p.ScheduledSize > 0 {
			released++
		}
	}
	if !oc.NextExpiry.Equal(nextExpiry) {
		m.fail("NextExpiry %v, want %v", oc.NextExpiry, nextExpiry)
	}
	if oc.Granted != newGrants || oc.Rejected != newRejections || oc.Released != released || oc.Adopted != adopted {
		m.fail("outcome %+v, counted granted %d rejected %d released %d adopted %d", oc, newGrants, newRejections, released, adopted)
	}

	// What PendingGrowth/Free promise: when everything pending fits, a
	// schedulable disk grants all of it.
	ds := dsWith(*m.spec.DeepCopy(), *prev.DeepCopy())
	ds.Status.StorageLimit = limit
	if m.disk.Schedulable &&
		prev.StorageScheduled+PendingGrowth(ds) <= limit && oc.Rejected != 0 {
		m.fail("pending growth %d fits (%d of %d scheduled) but %d rejected: %+v", PendingGrowth(ds), prev.StorageScheduled, limit, oc.Rejected, out)
	}

	// Deciding the result again changes nothing.
	next := m.input()
	next.Previous = *out.DeepCopy()
	if stable, oc3 := Decide(next); !reflect.DeepEqual(out, stable) || oc3.Granted+oc3.Rejected+oc3.Released+oc3.Adopted != 0 {
		m.fail("not stable:\n%+v\n%+v\n%+v", out, stable, oc3)
	}

	m.grants += oc.Granted
	m.rejections += oc.Rejected
	m.releases += oc.Released
	m.status, m.outcome = out, oc
}

// handedOff reports whether replica r took over a reservation in out.
func (m *ledgerModel) handedOff(r string, out dsv1.DiskScheduleStatus) bool {
	for v, res := range m.spec.Reservations {
		if res.Replica == r && out.Reservations[v].State == dsv1.ReservationStateFulfilled && out.Reservations[v].Replica == r {
			return true
		}
	}
	return false
}

func TestDecideProperties(t *testing.T) {
	const steps = 2500
	for _, tc := range []struct {
		seed   uint64
		strict bool
	}{
		{1, true}, {2, true}, {3, true}, {4, false}, {5, false}, {6, false}, {7, false}, {8, true},
	} {
		t.Run(fmt.Sprintf("seed=%d/strict=%v", tc.seed, tc.strict), func(t *testing.T) {
			m := &ledgerModel{
				t: t, rng: rand.New(rand.NewPCG(tc.seed, 0x1ed9e7)), strict: tc.strict,
				spec: dsv1.DiskScheduleSpec{Name: "d1", NodeID: "n1",
					Replicas: map[string]rb{}, BackingImages: map[string]rb{}, Reservations: map[string]dsv1.DiskScheduleReservation{}},
				disk:    okDisk(0),
				now:     t0,
				running: map[string]bool{},
			}
			m.disk.Limit = (m.rng.Int64N(100) + 20) * Gi
			for m.step = 0; m.step < steps; m.step++ {
				for n := m.rng.IntN(3) + 1; n > 0; n-- {
					m.mutate()
				}
				m.decide()
			}
			t.Logf("grants %d, rejections %d, releases %d, handoffs %d, expiries %d, steps over the limit %d",
				m.grants, m.rejections, m.releases, m.handoffs, m.expiries, m.overLimitSteps)
			// The sequence must have exercised what it is meant to.
			if m.grants < steps/4 || m.rejections < steps/20 || m.handoffs < 10 || m.expiries < 10 {
				t.Errorf("sequence too tame: grants %d rejections %d handoffs %d expiries %d", m.grants, m.rejections, m.handoffs, m.expiries)
			}
		})
	}
}

// TestDecideHandoffBeforeTheReservationIsDecided covers a reservation and
// the replica that takes it over arriving in the same spec, before the
// reservation was decided: the space is charged once, to the replica.
func TestDecideHandoffBeforeTheReservationIsDecided(t *testing.T) {
	in := Input{
		Spec: dsv1.DiskScheduleSpec{
			Name: "disk-1", NodeID: "node-1",
			Replicas:     map[string]dsv1.RequestedBytes{"r-local": dsv1.RequestedBytes(100 * Gi)},
			Reservations: map[string]dsv1.DiskScheduleReservation{"vol": {Size: 100 * Gi, Pod: "default/p", Replica: "r-local"}},
		},
		Generation: 1,
		Disk:       Disk{Limit: 150 * Gi, Schedulable: true},
		Now:        time.Unix(1000, 0),
	}
	st, _ := Decide(in)
	if r := st.Replicas["r-local"]; r.State != dsv1.RequestStateScheduled || r.ScheduledSize != 100*Gi {
		t.Errorf("replica: %+v, want scheduled at 100Gi", r)
	}
	if res := st.Reservations["vol"]; res.State != dsv1.ReservationStateFulfilled || res.ScheduledSize != 0 || res.Replica != "r-local" {
		t.Errorf("reservation: %+v, want fulfilled by r-local with 0 bytes", res)
	}
	if st.StorageScheduled != 100*Gi {
		t.Errorf("storageScheduled %d, want 100Gi charged once", st.StorageScheduled)
	}
}

// A replica Longhorn placed on the disk before the extender's reservation
// for its volume was written (so no request named the reservation) takes
// the reservation over: the volume is not counted twice (rule 5).
func TestDecideReservationTakenOverByAPlacedReplica(t *testing.T) {
	granted := dsv1.RequestStatus{State: dsv1.RequestStateScheduled, RequestedSize: 100 * Gi, ScheduledSize: 100 * Gi}
	for _, tc := range []struct {
		name     string
		previous dsv1.DiskScheduleStatus
	}{
		{"reservation not decided yet", dsv1.DiskScheduleStatus{Replicas: map[string]dsv1.RequestStatus{"r-1": granted}, StorageScheduled: 100 * Gi}},
		{"reservation granted", dsv1.DiskScheduleStatus{
			Replicas:         map[string]dsv1.RequestStatus{"r-1": granted},
			Reservations:     map[string]dsv1.ReservationStatus{"vol": {State: dsv1.ReservationStateScheduled, RequestedSize: 100 * Gi, Pod: "default/p", ScheduledSize: 100 * Gi}},
			StorageScheduled: 200 * Gi,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{
				Spec: dsv1.DiskScheduleSpec{
					Name: "disk-1", NodeID: "node-1",
					Replicas:     map[string]dsv1.RequestedBytes{"r-1": dsv1.RequestedBytes(100 * Gi)},
					Reservations: map[string]dsv1.DiskScheduleReservation{"vol": {Size: 100 * Gi, Pod: "default/p"}},
				},
				Generation:    2,
				Previous:      tc.previous,
				Disk:          Disk{Limit: 400 * Gi, Schedulable: true},
				Persisted:     Owners{Replicas: map[string]bool{"r-1": true}},
				PlacedVolumes: map[string]string{"r-1": "vol"},
				Now:           time.Unix(1000, 0),
			}
			st, _ := Decide(in)
			if res := st.Reservations["vol"]; res.State != dsv1.ReservationStateFulfilled || res.ScheduledSize != 0 || res.Replica != "r-1" {
				t.Errorf("reservation: %+v, want fulfilled by r-1 with 0 bytes", res)
			}
			if st.StorageScheduled != 100*Gi {
				t.Errorf("storageScheduled %s, want 100Gi: the volume counted once", Bytes(st.StorageScheduled))
			}
			// Without the placed replica, the reservation stands.
			in.PlacedVolumes = nil
			if st, _ := Decide(in); st.Reservations["vol"].State != dsv1.ReservationStateScheduled {
				t.Errorf("without a placed replica the reservation is %+v, want scheduled", st.Reservations["vol"])
			}
		})
	}
}

// TestDecideBoundPodHeld: a reservation whose pod is bound to the disk's
// node is held with no expiry, however long, and the controller is never
// asked to come back for it; unbound again (the pod created anew) it gets
// a full timeout (rule 6).
func TestDecideBoundPodHeld(t *testing.T) {
	bound := map[string]PodBinding{"v": {State: PodBoundHere, Since: t0.Add(time.Second)}}
	in := Input{
		Spec: dsv1.DiskScheduleSpec{NodeID: "node-y", Reservations: map[string]dsv1.DiskScheduleReservation{
			"v": {Size: 100 * Gi, Pod: "ns/p"},
		}},
		Generation: 1, Disk: okDisk(100 * Gi), ReservationTimeout: timeout, Now: t0,
	}
	st, oc := decide(t, in)
	wantRes(t, st.Reservations, "v", resScheduled(100*Gi, "ns/p", t0.Add(timeout)))

	// Bound before expiresAt: held, expiresAt gone, no requeue.
	in.Pods = bound
	in.Generation, in.Previous, in.Now = 2, st, t0.Add(time.Second)
	st, oc = decide(t, in)
	held := dsv1.ReservationStatus{State: dsv1.ReservationStateScheduled, RequestedSize: 100 * Gi, Pod: "ns/p", ScheduledSize: 100 * Gi}
	wantRes(t, st.Reservations, "v", held)
	wantOutcome(t, oc, 0, 0, 0, 0)
	if !oc.NextExpiry.IsZero() {
		t.Errorf("NextExpiry = %v, want zero for a held reservation", oc.NextExpiry)
	}

	// A minute later, with a request waiting for the space: still held, its
	// volume not being best-effort, for the timeout after its pod was bound.
	in.Spec.Replicas = map[string]rb{"r-other": 10 * Gi}
	in.Generation, in.Previous, in.Now = 3, st, t0.Add(time.Minute)
	st, oc = decide(t, in)
	wantRes(t, st.Reservations, "v", held)
	wantReq(t, "replica", st.Replicas, "r-other", rejected(10*Gi, 0, "requested 10Gi, 0 free of limit 100Gi"+holding(100*Gi)))
	wantScheduled(t, st, 100*Gi)
	wantOutcome(t, oc, 0, 1, 0, 0)

	// Without a request waiting, an hour later: still held.
	in.Spec.Replicas = nil
	in.Generation, in.Previous, in.Now = 4, st, t0.Add(time.Hour)
	st, oc = decide(t, in)
	wantRes(t, st.Reservations, "v", held)
	wantOutcome(t, oc, 0, 0, 0, 0)

	// A pod of that name not bound (created again): a full timeout from now.
	in.Pods = nil
	in.Generation, in.Previous, in.Now = 5, st, t0.Add(2*time.Hour)
	st, oc = decide(t, in)
	wantRes(t, st.Reservations, "v", resScheduled(100*Gi, "ns/p", t0.Add(2*time.Hour+timeout)))
	if !oc.NextExpiry.Equal(t0.Add(2*time.Hour + timeout)) {
		t.Errorf("NextExpiry = %v, want %v", oc.NextExpiry, t0.Add(2*time.Hour+timeout))
	}

	// A reservation written for a pod already bound here is held from its grant.
	in2 := Input{
		Spec: dsv1.DiskScheduleSpec{NodeID: "node-y", Reservations: map[string]dsv1.DiskScheduleReservation{
			"v": {Size: 100 * Gi, Pod: "ns/p"},
		}},
		Pods: bound, Generation: 1, Disk: okDisk(100 * Gi), ReservationTimeout: timeout, Now: t0,
	}
	st, oc = decide(t, in2)
	wantRes(t, st.Reservations, "v", held)
	wantOutcome(t, oc, 1, 0, 0, 0)
	if !oc.NextExpiry.IsZero() {
		t.Errorf("NextExpiry = %v, want zero", oc.NextExpiry)
	}
}

// TestDecideReservationReleasedByItsPod: a granted reservation ends, and
// its space is free in the same decision, when its pod is bound to another
// node, or deleted after it was held, or when a replica of its volume is
// persisted on another disk of the node (rule 6); a pod not found before it
// was held lets the reservation live to its expiresAt.
func TestDecideReservationReleasedByItsPod(t *testing.T) {
	expires := t0.Add(timeout)
	unbound := resScheduled(100*Gi, "ns/p", expires)
	held := dsv1.ReservationStatus{State: dsv1.ReservationStateScheduled, RequestedSize: 100 * Gi, Pod: "ns/p", ScheduledSize: 100 * Gi}
	for _, tc := range []struct {
		name      string
		prev      dsv1.ReservationStatus
		pod       PodBinding
		onNode    map[string]string
		want      dsv1.ReservationStatus
		wantFreed bool
	}{
		{name: "held, pod bound elsewhere", prev: held, pod: PodBinding{State: PodBoundElsewhere, Node: "node-x"}, wantFreed: true,
			want: dsv1.ReservationStatus{State: dsv1.ReservationStateExpired, RequestedSize: 100 * Gi, Pod: "ns/p",
				Message: "pod ns/p bound to node-x, not node-y: 100Gi released"}},
		{name: "not held yet, pod bound elsewhere", prev: unbound, pod: PodBinding{State: PodBoundElsewhere, Node: "node-x"}, wantFreed: true,
			want: dsv1.ReservationStatus{State: dsv1.ReservationStateExpired, RequestedSize: 100 * Gi, Pod: "ns/p",
				Message: "pod ns/p bound to node-x, not node-y: 100Gi released"}},
		{name: "held, pod deleted", prev: held, pod: PodBinding{State: PodGone}, wantFreed: true,
			want: dsv1.ReservationStatus{State: dsv1.ReservationStateExpired, RequestedSize: 100 * Gi, Pod: "ns/p",
				Message: "pod ns/p deleted: 100Gi released"}},
		{name: "not held yet, pod not found", prev: unbound, pod: PodBinding{State: PodGone}, want: unbound},
		{name: "held, replica persisted on another disk of the node", prev: held, pod: PodBinding{State: PodBoundHere, Since: t0},
			onNode: map[string]string{"v": "r-v"}, wantFreed: true,
			want: dsv1.ReservationStatus{State: dsv1.ReservationStateFulfilled, RequestedSize: 100 * Gi, Pod: "ns/p", Replica: "r-v",
				Message: "replica r-v of the volume is persisted on node node-y: 100Gi released"}},
		{name: "not held yet, replica persisted on the node", prev: unbound, onNode: map[string]string{"v": "r-v"}, wantFreed: true,
			want: dsv1.ReservationStatus{State: dsv1.ReservationStateFulfilled, RequestedSize: 100 * Gi, Pod: "ns/p", Replica: "r-v",
				Message: "replica r-v of the volume is persisted on node node-y: 100Gi released"}},
		{name: "held, pod bound here", prev: held, pod: PodBinding{State: PodBoundHere, Since: t0}, want: held},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{
				Spec: dsv1.DiskScheduleSpec{NodeID: "node-y",
					Reservations: map[string]dsv1.DiskScheduleReservation{"v": {Size: 100 * Gi, Pod: "ns/p"}},
					Replicas:     map[string]rb{"r-other": 10 * Gi}},
				Previous: dsv1.DiskScheduleStatus{StorageScheduled: 100 * Gi, StorageLimit: 100 * Gi,
					Reservations: map[string]dsv1.ReservationStatus{"v": tc.prev}},
				Pods: map[string]PodBinding{"v": tc.pod}, NodeReplicas: tc.onNode,
				Generation: 2, Disk: okDisk(100 * Gi), ReservationTimeout: timeout, Now: t0.Add(time.Second),
			}
			st, oc := decide(t, in)
			wantRes(t, st.Reservations, "v", tc.want)
			if tc.wantFreed {
				// The freed space goes to the waiting request in the same decision.
				wantReq(t, "replica", st.Replicas, "r-other", granted(10*Gi))
				wantScheduled(t, st, 10*Gi)
				wantOutcome(t, oc, 1, 0, 1, 0)
			} else {
				wantReq(t, "replica", st.Replicas, "r-other", rejected(10*Gi, 0, "requested 10Gi, 0 free of limit 100Gi"+holding(100*Gi)))
				wantScheduled(t, st, 100*Gi)
				wantOutcome(t, oc, 0, 1, 0, 0)
			}
		})
	}

	// A new reservation of a pod bound elsewhere, or of a volume with a
	// replica on the node already, is never granted.
	for _, tc := range []struct {
		name   string
		pod    PodBinding
		onNode map[string]string
		want   dsv1.ReservationStatus
	}{
		{name: "pod bound elsewhere", pod: PodBinding{State: PodBoundElsewhere, Node: "node-x"},
			want: dsv1.ReservationStatus{State: dsv1.ReservationStateExpired, RequestedSize: 100 * Gi, Pod: "ns/p",
				Message: "pod ns/p bound to node-x, not node-y"}},
		{name: "replica on the node", onNode: map[string]string{"v": "r-v"},
			want: dsv1.ReservationStatus{State: dsv1.ReservationStateFulfilled, RequestedSize: 100 * Gi, Pod: "ns/p", Replica: "r-v",
				Message: "replica r-v of the volume is persisted on node node-y"}},
	} {
		t.Run("new, "+tc.name, func(t *testing.T) {
			in := Input{
				Spec: dsv1.DiskScheduleSpec{NodeID: "node-y",
					Reservations: map[string]dsv1.DiskScheduleReservation{"v": {Size: 100 * Gi, Pod: "ns/p"}}},
				Pods: map[string]PodBinding{"v": tc.pod}, NodeReplicas: tc.onNode,
				Generation: 1, Disk: okDisk(100 * Gi), ReservationTimeout: timeout, Now: t0,
			}
			st, oc := decide(t, in)
			wantRes(t, st.Reservations, "v", tc.want)
			wantScheduled(t, st, 0)
			wantOutcome(t, oc, 0, 0, 0, 0)
		})
	}
}

// TestDecideHeldReservationsModel drives Decide through random sequences of
// reservations, pod bindings, replicas placed on the node, requests and
// time, and checks rule 6 after every decision: a granted reservation has an
// expiresAt exactly when its pod is not bound to the disk's node; it ends
// only for a reason rule 6 gives; the controller is asked back at the
// earliest expiresAt; and the limit holds.
func TestDecideHeldReservationsModel(t *testing.T) {
	states := []PodBinding{{}, {State: PodBoundHere}, {State: PodBoundElsewhere, Node: "node-x"}, {State: PodGone}}
	for seed := uint64(1); seed <= 40; seed++ {
		rng := rand.New(rand.NewPCG(seed, 6))
		spec := dsv1.DiskScheduleSpec{NodeID: "node-y", Reservations: map[string]dsv1.DiskScheduleReservation{}, Replicas: map[string]rb{}}
		var status dsv1.DiskScheduleStatus
		pods := map[string]PodBinding{}
		onNode := map[string]string{}
		now := t0
		limit := int64(100 * Gi)
		for step := 0; step < 300; step++ {
			// One to three changes land between two decisions, as they do
			// between two reconciles.
			for ops := 1 + rng.IntN(3); ops > 0; ops-- {
				v := volumePool[rng.IntN(len(volumePool))]
				switch rng.IntN(7) {
				case 0: // the extender writes a reservation for a new pod
					if _, ok := spec.Reservations[v]; !ok {
						spec.Reservations[v] = dsv1.DiskScheduleReservation{Size: (rng.Int64N(30) + 1) * Gi, Pod: fmt.Sprintf("ns/pod-%d", step)}
						pods[v] = PodBinding{}
						delete(onNode, v)
					}
				case 1: // the pod is bound, deleted, or created again
					if p := states[rng.IntN(len(states))]; p.State != pods[v].State {
						if p.State == PodBoundHere {
							p.Since = now
						}
						pods[v] = p
					}
				case 2: // a replica of the volume lands on another disk of the node
					if rng.IntN(3) == 0 {
						onNode[v] = v + "-r"
					}
				case 3: // the extender drops a spent reservation
					if st, ok := status.Reservations[v]; ok && st.State != dsv1.ReservationStateScheduled {
						delete(spec.Reservations, v)
					}
				case 4: // a request competes for the space
					spec.Replicas[fmt.Sprintf("r-%d", step)] = rb((rng.Int64N(20) + 1) * Gi)
				default: // time passes
					now = now.Add(time.Duration(rng.Int64N(int64(2 * timeout))))
				}
			}
			in := Input{Spec: *spec.DeepCopy(), Generation: int64(step + 1), Previous: *status.DeepCopy(),
				Disk: okDisk(limit), Pods: map[string]PodBinding{}, NodeReplicas: map[string]string{}, ReservationTimeout: timeout, Now: now}
			for k, p := range pods {
				in.Pods[k] = p
			}
			for k, r := range onNode {
				in.NodeReplicas[k] = r
			}
			out, oc := decide(t, in)
			fail := func(format string, args ...any) {
				t.Helper()
				t.Fatalf("seed %d step %d (now %s): %s", seed, step, now.Format(time.RFC3339Nano), fmt.Sprintf(format, args...))
			}
			if out.StorageScheduled > limit {
				fail("storageScheduled %d over limit %d", out.StorageScheduled, limit)
			}
			var next time.Time
			for name, st := range out.Reservations {
				prev, had := status.Reservations[name]
				pod := in.Pods[name]
				switch st.State {
				case dsv1.ReservationStateScheduled:
					if (st.ExpiresAt == nil) != (pod.State == PodBoundHere) {
						fail("reservation %s scheduled with expiresAt %v, pod %+v", name, st.ExpiresAt, pod)
					}
					if st.ExpiresAt != nil && !now.Before(st.ExpiresAt.Time) {
						fail("reservation %s scheduled past its expiresAt %v", name, st.ExpiresAt)
					}
					if pod.State == PodBoundElsewhere || in.NodeReplicas[name] != "" {
						fail("reservation %s still held with pod %+v, replica on node %q", name, pod, in.NodeReplicas[name])
					}
					if st.ExpiresAt != nil && (next.IsZero() || st.ExpiresAt.Time.Before(next)) {
						next = st.ExpiresAt.Time
					}
				case dsv1.ReservationStateExpired, dsv1.ReservationStateFulfilled:
					if !had || prev.State != dsv1.ReservationStateScheduled || !reservationDecided(spec.Reservations[name], prev) {
						continue // decided before, or newly refused
					}
					yielded := strings.HasPrefix(st.Message, "yielded to ")
					if yielded && (pod.State != PodBoundHere || now.Before(pod.Since.Add(timeout))) {
						fail("reservation %s yielded before its bound: pod %+v: %s", name, pod, st.Message)
					}
					if pod.State == PodBoundHere && in.NodeReplicas[name] == "" && !yielded {
						fail("reservation %s of a pod bound here ended: %+v", name, st)
					}
					if st.State == dsv1.ReservationStateFulfilled && in.NodeReplicas[name] != st.Replica {
						fail("reservation %s fulfilled by %q, replica on node %q", name, st.Replica, in.NodeReplicas[name])
					}
					held := prev.ExpiresAt == nil
					due := !held && !now.Before(prev.ExpiresAt.Time)
					if st.State == dsv1.ReservationStateExpired && pod.State != PodBoundElsewhere && !(held && pod.State == PodGone) && !due && !yielded {
						fail("reservation %s expired early: was %+v, pod %+v: %s", name, prev, pod, st.Message)
					}
				}
			}
			if !oc.NextExpiry.Equal(next) {
				fail("NextExpiry %v, want %v", oc.NextExpiry, next)
			}
			// Rule 6: a replica request refused while a reservation that
			// yields holds space did not fit what Longhorn counts even
			// without every such reservation.
			var longhorn, yielding int64
			for name, st := range out.Replicas {
				longhorn += st.ScheduledSize
				_ = name
			}
			for name, st := range out.Reservations {
				if p := in.Pods[name]; st.State == dsv1.ReservationStateScheduled && p.State == PodBoundHere && !now.Before(p.Since.Add(timeout)) {
					yielding += st.ScheduledSize
				}
			}
			for name, st := range out.Replicas {
				if p, had := status.Replicas[name]; st.State == dsv1.RequestStateRejected && yielding > 0 &&
					!(had && p.RequestedSize == st.RequestedSize) && Fits(longhorn, st.RequestedSize-st.ScheduledSize, limit) {
					fail("replica %s refused (%s) though it fits what Longhorn counts (%s of %s) and reservations that yield hold %s",
						name, st.Message, Bytes(longhorn), Bytes(limit), Bytes(yielding))
				}
			}
			status = out
		}
	}
}
