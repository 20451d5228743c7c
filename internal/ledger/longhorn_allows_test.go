package ledger

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

// TestDecideReservationYields: a reservation never makes the ledger refuse
// a Longhorn placement that fits what Longhorn counts on the disk (rule 6):
// a best-effort volume's reservation is cut at once, in the same decision,
// with the reason; any other holds at most ReservationTimeout after its pod
// is bound; nothing is cut for a placement that would not fit anyway, and no
// more is cut than the placement needs.
func TestDecideReservationYields(t *testing.T) {
	bound := t0.Add(-time.Minute) // the pods were bound a minute before t0
	held := func(size int64, pod string) dsv1.ReservationStatus {
		return dsv1.ReservationStatus{State: dsv1.ReservationStateScheduled, RequestedSize: size, Pod: pod, ScheduledSize: size}
	}
	yielded := func(size int64, pod, taker string) dsv1.ReservationStatus {
		return dsv1.ReservationStatus{State: dsv1.ReservationStateExpired, RequestedSize: size, Pod: pod,
			Message: "yielded to " + taker + ", which fits what Longhorn counts on the disk: " + Bytes(size) +
				" released; pod " + pod + " keeps its node, the volume's locality may be degraded"}
	}
	// 300Gi limit: 100Gi placed by Longhorn, 150Gi reserved for v-a and 50Gi
	// for v-b, whose pods are bound here.
	prev := dsv1.DiskScheduleStatus{
		StorageScheduled: 300 * Gi, StorageLimit: 300 * Gi,
		Replicas:     map[string]dsv1.RequestStatus{"r-placed": granted(100 * Gi)},
		Reservations: map[string]dsv1.ReservationStatus{"v-a": held(150*Gi, "ns/a"), "v-b": held(50*Gi, "ns/b")},
	}
	spec := func(replicas map[string]rb) dsv1.DiskScheduleSpec {
		if _, ok := replicas["r-placed"]; !ok {
			replicas["r-placed"] = 100 * Gi
		}
		return dsv1.DiskScheduleSpec{NodeID: "n1", Replicas: replicas, Reservations: map[string]dsv1.DiskScheduleReservation{
			"v-a": {Size: 150 * Gi, Pod: "ns/a"}, "v-b": {Size: 50 * Gi, Pod: "ns/b"}}}
	}
	pods := map[string]PodBinding{"v-a": {State: PodBoundHere, Since: bound}, "v-b": {State: PodBoundHere, Since: bound}}
	for _, tc := range []struct {
		name       string
		replicas   map[string]rb
		bestEffort map[string]bool
		now        time.Time
		wantA      dsv1.ReservationStatus
		wantB      dsv1.ReservationStatus
		wantNew    dsv1.RequestStatus
		yielded    []string
		scheduled  int64
	}{
		{
			name: "best-effort: only the reservation the placement needs is cut", now: t0,
			replicas: map[string]rb{"r-new": 100 * Gi}, bestEffort: map[string]bool{"v-a": true, "v-b": true},
			wantA: yielded(150*Gi, "ns/a", "replica r-new"), wantB: held(50*Gi, "ns/b"), wantNew: granted(100 * Gi),
			yielded: []string{"v-a"}, scheduled: 250 * Gi,
		},
		{
			name: "best-effort: several cut when one is not enough", now: t0,
			replicas: map[string]rb{"r-new": 200 * Gi}, bestEffort: map[string]bool{"v-a": true, "v-b": true},
			wantA: yielded(150*Gi, "ns/a", "replica r-new"), wantB: yielded(50*Gi, "ns/b", "replica r-new"), wantNew: granted(200 * Gi),
			yielded: []string{"v-a", "v-b"}, scheduled: 300 * Gi,
		},
		{
			name: "nothing cut for a placement beyond what Longhorn counts", now: t0,
			replicas: map[string]rb{"r-new": 200*Gi + 1}, bestEffort: map[string]bool{"v-a": true, "v-b": true},
			wantA: held(150*Gi, "ns/a"), wantB: held(50*Gi, "ns/b"),
			wantNew:   rejected(200*Gi+1, 0, "requested 214748364801, 0 free of limit 300Gi"),
			scheduled: 300 * Gi,
		},
		{
			name: "strict-local within its bound holds; a best-effort one alone is not enough", now: t0,
			replicas: map[string]rb{"r-new": 100 * Gi}, bestEffort: map[string]bool{"v-b": true},
			wantA: held(150*Gi, "ns/a"), wantB: held(50*Gi, "ns/b"),
			wantNew: rejected(100*Gi, 0, "requested 100Gi, 0 free of limit 300Gi"+
				"; reservations that do not yield yet hold 150Gi, each for at most 5m0s before and 5m0s after its pod is bound"),
			scheduled: 300 * Gi,
		},
		{
			name: "strict-local within its bound holds; the best-effort one yields to a placement it makes room for", now: t0,
			replicas: map[string]rb{"r-new": 50 * Gi}, bestEffort: map[string]bool{"v-b": true},
			wantA: held(150*Gi, "ns/a"), wantB: yielded(50*Gi, "ns/b", "replica r-new"), wantNew: granted(50 * Gi),
			yielded: []string{"v-b"}, scheduled: 300 * Gi,
		},
		{
			name: "strict-local yields once its pod has been bound for the timeout", now: bound.Add(timeout),
			replicas: map[string]rb{"r-new": 100 * Gi},
			wantA:    yielded(150*Gi, "ns/a", "replica r-new"), wantB: held(50*Gi, "ns/b"), wantNew: granted(100 * Gi),
			yielded: []string{"v-a"}, scheduled: 250 * Gi,
		},
		{
			name: "growth of a placed replica takes a best-effort reservation's space too", now: t0,
			replicas: map[string]rb{"r-placed": 150 * Gi}, bestEffort: map[string]bool{"v-a": true},
			wantA: yielded(150*Gi, "ns/a", "replica r-placed"), wantB: held(50*Gi, "ns/b"),
			yielded: []string{"v-a"}, scheduled: 200 * Gi,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := spec(tc.replicas)
			st, oc := decide(t, Input{Spec: s, Generation: 4, Previous: prev, Disk: okDisk(300 * Gi), Pods: pods,
				BestEffort: tc.bestEffort, ReservationTimeout: timeout, Now: tc.now})
			wantRes(t, st.Reservations, "v-a", tc.wantA)
			wantRes(t, st.Reservations, "v-b", tc.wantB)
			if tc.wantNew.State != "" {
				wantReq(t, "replica", st.Replicas, "r-new", tc.wantNew)
			}
			wantScheduled(t, st, tc.scheduled)
			var got []string
			for _, y := range oc.Yielded {
				got = append(got, y.Volume)
				if y.Pod != st.Reservations[y.Volume].Pod || y.Message != st.Reservations[y.Volume].Message {
					t.Errorf("yield %+v does not match the reservation's status %+v", y, st.Reservations[y.Volume])
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.yielded, ",") {
				t.Errorf("yielded %v, want %v", got, tc.yielded)
			}
		})
	}
}

// TestDecideGrowthOnADiskThatTakesNoNewReplicas: rule 8 refuses new
// placements on a disk that is not schedulable, and judges growth of what is
// placed there (an expansion, the copy a granted replica needs) on space
// alone, as Longhorn does.
func TestDecideGrowthOnADiskThatTakesNoNewReplicas(t *testing.T) {
	for _, reason := range []string{dsv1.DiskScheduleReasonNodeUnschedulable, dsv1.DiskScheduleReasonNodeSchedulingDisabled,
		dsv1.DiskScheduleReasonDiskSchedulingDisabled, dsv1.DiskScheduleReasonNodeEvictionRequested, dsv1.DiskScheduleReasonNodeNotReady} {
		t.Run(reason, func(t *testing.T) {
			disk := Disk{Limit: 100 * Gi, Reason: reason, Message: "no new replicas"}
			prev := dsv1.DiskScheduleStatus{StorageScheduled: 40 * Gi, StorageLimit: 100 * Gi,
				Replicas: map[string]dsv1.RequestStatus{"r-a": granted(40 * Gi)}}
			spec := dsv1.DiskScheduleSpec{
				Replicas:      map[string]rb{"r-a": 60 * Gi, "r-new": 10 * Gi},
				BackingImages: map[string]rb{"bi-a": 5 * Gi, "bi-other": 5 * Gi},
			}
			st, oc := decide(t, Input{Spec: spec, Generation: 2, Previous: prev, Disk: disk,
				ReplicaImages: map[string]string{"r-a": "bi-a"}, ReservationTimeout: timeout, Now: t0})
			msg := "disk is not schedulable (" + reason + "): no new replicas"
			wantReq(t, "replica", st.Replicas, "r-a", granted(60*Gi))
			wantReq(t, "replica", st.Replicas, "r-new", rejected(10*Gi, 0, msg))
			wantReq(t, "backing image", st.BackingImages, "bi-a", granted(5*Gi))
			wantReq(t, "backing image", st.BackingImages, "bi-other", rejected(5*Gi, 0, msg))
			wantScheduled(t, st, 65*Gi)
			wantOutcome(t, oc, 2, 2, 0, 0)
		})
	}
}

// TestDecideCopyForAStartingReplica: the backing-image copy a replica
// granted on the disk needs to start is never refused (DESIGN §4): on a full
// disk it is adopted over the limit as Longhorn counts it (rule 7,
// Overcommitted=True), and new growth is then refused. A copy for no
// replica granted here is refused as before.
func TestDecideCopyForAStartingReplica(t *testing.T) {
	// Longhorn's scheduler counted the volume size alone: the replica fills
	// the disk, then its replica controller adds the copy.
	prev := dsv1.DiskScheduleStatus{StorageScheduled: 100 * Gi, StorageLimit: 100 * Gi,
		Replicas: map[string]dsv1.RequestStatus{"r-a": granted(100 * Gi)}}
	spec := dsv1.DiskScheduleSpec{Replicas: map[string]rb{"r-a": 100 * Gi}, BackingImages: map[string]rb{"bi-a": 2 * Gi}}
	in := Input{Spec: spec, Generation: 2, Previous: prev, Disk: okDisk(100 * Gi),
		Persisted:     Owners{Replicas: map[string]bool{"r-a": true}},
		ReplicaImages: map[string]string{"r-a": "bi-a"}, ReservationTimeout: timeout, Now: t0}
	st, oc := decide(t, in)
	got := st.BackingImages["bi-a"]
	if got.State != dsv1.RequestStateScheduled || got.ScheduledSize != 2*Gi || !strings.Contains(got.Message, "adopted over the limit: replica r-a") {
		t.Errorf("copy for the starting replica: %+v, want adopted at 2Gi", got)
	}
	wantScheduled(t, st, 102*Gi)
	wantOutcome(t, oc, 1, 0, 0, 1)
	wantCondition(t, st, dsv1.DiskScheduleConditionOvercommitted, metav1.ConditionTrue, dsv1.DiskScheduleReasonAdoptedOverLimit)

	// New growth is refused until usage is back under the limit.
	in.Spec.Replicas["r-b"] = 1
	in.Previous, in.Generation = st, 3
	st, _ = decide(t, in)
	wantReq(t, "replica", st.Replicas, "r-b", rejected(1, 0, "requested 1, 0 free of limit 100Gi"))

	// Without the replica's grant (ReplicaImages names no granted replica),
	// the same copy is refused: the mechanism is what admits it.
	in = Input{Spec: spec, Generation: 2, Previous: prev, Disk: okDisk(100 * Gi), ReservationTimeout: timeout, Now: t0}
	st, _ = decide(t, in)
	wantReq(t, "backing image", st.BackingImages, "bi-a", rejected(2*Gi, 0, "requested 2Gi, 0 free of limit 100Gi"))
}
