package mirror

import (
	"reflect"
	"testing"
	"time"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
)

const gi = int64(1) << 30

type rb = dsv1.RequestedBytes

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

const grace = 30 * time.Second

func TestPlanAdoptsAndRaises(t *testing.T) {
	spec := dsv1.DiskScheduleSpec{Name: "disk-0", NodeID: "node-0",
		Replicas:      map[string]rb{"r-low": rb(5 * gi), "r-same": rb(10 * gi)},
		Reservations:  map[string]dsv1.DiskScheduleReservation{"vol": {Size: gi, Pod: "ns/p"}},
		BackingImages: map[string]rb{"bi-unknown": rb(gi)},
	}
	persisted := Persisted{Persisted: ledger.Persisted{
		Replicas:      map[string]int64{"r-low": 8 * gi, "r-same": 10 * gi, "r-new": 3 * gi},
		BackingImages: map[string]int64{"bi-new": 2 * gi, "bi-unknown": 0, "bi-pending": 0},
	}}
	mem := &Memory{}
	next, changes, recheck := Plan(spec, persisted, mem, t0, grace)
	want := dsv1.DiskScheduleSpec{Name: "disk-0", NodeID: "node-0",
		Replicas:      map[string]rb{"r-low": rb(8 * gi), "r-same": rb(10 * gi), "r-new": rb(3 * gi)},
		Reservations:  spec.Reservations,
		BackingImages: map[string]rb{"bi-new": rb(2 * gi), "bi-unknown": rb(gi)},
	}
	if !reflect.DeepEqual(next, want) {
		t.Errorf("next spec:\n got %+v\nwant %+v", next, want)
	}
	wantChanges := []Change{
		{Action: Raised, Kind: ledger.Replica, Name: "r-low", From: 5 * gi, To: 8 * gi},
		{Action: Adopted, Kind: ledger.Replica, Name: "r-new", To: 3 * gi},
		{Action: Adopted, Kind: ledger.BackingImage, Name: "bi-new", To: 2 * gi},
	}
	if !reflect.DeepEqual(changes, wantChanges) {
		t.Errorf("changes:\n got %+v\nwant %+v", changes, wantChanges)
	}
	if recheck != 0 {
		t.Errorf("recheck %v, want none", recheck)
	}
	// Planning the result again changes nothing.
	again, changes, _ := Plan(next, persisted, mem, t0.Add(time.Hour), grace)
	if len(changes) != 0 || !reflect.DeepEqual(again, next) {
		t.Errorf("planning the planned spec again: %+v, %+v", changes, again)
	}
}

func TestPlanReleasesUnbackedAfterGrace(t *testing.T) {
	spec := dsv1.DiskScheduleSpec{Replicas: map[string]rb{"r-ghost": rb(gi)}, BackingImages: map[string]rb{"bi-ghost": rb(gi)}}
	mem := &Memory{}
	for _, at := range []time.Duration{0, 10 * time.Second, grace - time.Millisecond} {
		next, changes, recheck := Plan(spec, Persisted{}, mem, t0.Add(at), grace)
		if len(changes) != 0 || !reflect.DeepEqual(next, spec) {
			t.Fatalf("at %v: released before the grace period: %+v", at, changes)
		}
		if recheck != grace-at {
			t.Errorf("at %v: recheck %v, want %v", at, recheck, grace-at)
		}
	}
	next, changes, _ := Plan(spec, Persisted{}, mem, t0.Add(grace), grace)
	if len(next.Replicas)+len(next.BackingImages) != 0 || len(changes) != 2 || changes[0].Action != Released || changes[1].Action != Released {
		t.Errorf("after the grace period: %+v, %+v", next, changes)
	}
	// A release whose write failed is planned again at once.
	if _, changes, _ := Plan(spec, Persisted{}, mem, t0.Add(grace+time.Second), grace); len(changes) != 2 {
		t.Errorf("the release planned again after a failed write: %+v", changes)
	}
}

func TestPlanNewSizeRestartsGrace(t *testing.T) {
	mem := &Memory{}
	Plan(dsv1.DiskScheduleSpec{Replicas: map[string]rb{"r": rb(gi)}}, Persisted{}, mem, t0, grace)
	spec := dsv1.DiskScheduleSpec{Replicas: map[string]rb{"r": rb(2 * gi)}}
	_, changes, recheck := Plan(spec, Persisted{}, mem, t0.Add(grace), grace)
	if len(changes) != 0 || recheck != grace {
		t.Errorf("a request written again at a new size: changes %+v, recheck %v; want none and a new grace period", changes, recheck)
	}
}

func TestPlanReleasesAtOnceWhatWasSeenBacked(t *testing.T) {
	mem := &Memory{}
	spec := dsv1.DiskScheduleSpec{Replicas: map[string]rb{"r": rb(gi)}, BackingImages: map[string]rb{"bi": rb(gi)}}
	Plan(spec, Persisted{Persisted: ledger.Persisted{Replicas: map[string]int64{"r": gi}, BackingImages: map[string]int64{"bi": gi}}}, mem, t0, grace)
	next, changes, recheck := Plan(spec, Persisted{}, mem, t0.Add(time.Second), grace)
	if len(next.Replicas)+len(next.BackingImages) != 0 || len(changes) != 2 || recheck != 0 {
		t.Errorf("entries seen backed, then not: %+v, %+v, recheck %v; want released at once", next, changes, recheck)
	}
	// A release whose write failed is planned again, at once.
	_, changes, _ = Plan(spec, Persisted{}, mem, t0.Add(2*time.Second), grace)
	if len(changes) != 2 {
		t.Errorf("the release planned again after a failed write: %+v", changes)
	}
	// Once the release is written the names are forgotten: asked again,
	// they are new requests with a grace period.
	Plan(next, Persisted{}, mem, t0.Add(3*time.Second), grace)
	_, changes, recheck = Plan(spec, Persisted{}, mem, t0.Add(4*time.Second), grace)
	if len(changes) != 0 || recheck != grace {
		t.Errorf("the names requested again: %+v, recheck %v", changes, recheck)
	}
}

func TestPlanLowersGrowthThatDidNotLand(t *testing.T) {
	mem := &Memory{}
	spec := dsv1.DiskScheduleSpec{Replicas: map[string]rb{"r": rb(20 * gi)}}
	persisted := Persisted{Persisted: ledger.Persisted{Replicas: map[string]int64{"r": 10 * gi}}}
	_, changes, recheck := Plan(spec, persisted, mem, t0, grace)
	if len(changes) != 0 || recheck != grace {
		t.Fatalf("a growth not landed yet: %+v, recheck %v", changes, recheck)
	}
	next, changes, _ := Plan(spec, persisted, mem, t0.Add(grace), grace)
	if next.Replicas["r"] != rb(10*gi) || len(changes) != 1 || changes[0].Action != Lowered {
		t.Errorf("after the grace period: %+v, %+v", next.Replicas, changes)
	}
	// A growth that lands within the grace period stays.
	mem = &Memory{}
	Plan(spec, persisted, mem, t0, grace)
	_, changes, recheck = Plan(spec, Persisted{Persisted: ledger.Persisted{Replicas: map[string]int64{"r": 20 * gi}}}, mem, t0.Add(grace), grace)
	if len(changes) != 0 || recheck != 0 {
		t.Errorf("a growth that landed: %+v, recheck %v", changes, recheck)
	}
}

// An entry nothing will back (a replica that shares its data directory
// with the one counted, a replica persisted on another disk, a write that
// lost) is released at once, saying why.
func TestPlanReleasesLostAtOnce(t *testing.T) {
	mem := &Memory{}
	spec := dsv1.DiskScheduleSpec{Replicas: map[string]rb{"r-counted": rb(gi), "r-lost": rb(gi)},
		ReplicaVersions: map[string]string{"r-counted": "7", "r-lost": "9"}}
	persisted := Persisted{Persisted: ledger.Persisted{Replicas: map[string]int64{"r-counted": gi}},
		Lost: map[string]string{"r-lost": "persisted on disk uuid-1"}}
	next, changes, recheck := Plan(spec, persisted, mem, t0, grace)
	want := []Change{{Action: Released, Kind: ledger.Replica, Name: "r-lost", From: gi, Why: "persisted on disk uuid-1"}}
	if !reflect.DeepEqual(changes, want) || len(next.Replicas) != 1 || recheck != 0 {
		t.Errorf("a lost entry: %+v, %+v, recheck %v; want released at once", next.Replicas, changes, recheck)
	}
	if !reflect.DeepEqual(next.ReplicaVersions, map[string]string{"r-counted": "7"}) {
		t.Errorf("versions %v, want the released entry's gone with it", next.ReplicaVersions)
	}
	if s := changes[0].String(); s != "replica r-lost (1073741824 bytes: persisted on disk uuid-1)" {
		t.Errorf("change described as %q", s)
	}
}
