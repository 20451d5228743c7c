package ledger

import (
	"math"
	"strings"
	"testing"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

// TestHasActualSpace: a disk may take a replica while what is available
// less its actual size stays strictly above the minimum the setting keeps
// free; a disk of unknown size never may.
func TestHasActualSpace(t *testing.T) {
	cases := []struct {
		name                            string
		available, actual, maximum, pct int64
		want                            bool
	}{
		{"strictly above the minimum", 26, 0, 100, 25, true},
		{"at the minimum", 25, 0, 100, 25, false},
		{"actual size counted", 30, 5, 100, 25, false},
		{"unknown maximum", 10, 0, 0, 0, false},
		{"nothing available at 0%", 0, 0, 100, 0, false},
		{"something available at 0%", 1, 0, 100, 0, true},
	}
	for _, c := range cases {
		if got := HasActualSpace(c.available, c.actual, c.maximum, c.pct); got != c.want {
			t.Errorf("%s: HasActualSpace(%d, %d, %d, %d) = %v, want %v", c.name, c.available, c.actual, c.maximum, c.pct, got, c.want)
		}
	}
}

// The actual-space rule is Longhorn's IsSchedulableToDisk condition
// (storageAvailable − required > storageMaximum × minimal% / 100, strict),
// with what the ledger granted since Longhorn's measure added to required.
func TestActualSpaceFailure(t *testing.T) {
	disk := ActualSpace{Maximum: 100 * Gi, Available: 40 * Gi, MinimalAvailablePercentage: 25}
	for _, tc := range []struct {
		name          string
		space         ActualSpace
		since, actual int64
		// want is "" when the replica fits, otherwise parts of the message.
		want []string
	}{
		{"an empty replica on a disk above the minimum", disk, 0, 0, nil},
		{"data that leaves more than the minimum", disk, 0, 14 * Gi, nil},
		{"data that leaves exactly the minimum", disk, 0, 15 * Gi,
			[]string{"40Gi available", "less 0 granted here since and 15Gi of the replica's data, leaves 25Gi", "not more than the 25Gi", "25% of 100Gi"}},
		{"grants since the measure count", disk, 10 * Gi, 5 * Gi,
			[]string{"less 10Gi granted here since and 5Gi of the replica's data, leaves 25Gi"}},
		{"grants since the measure alone can fill it", disk, 40 * Gi, 0, []string{"leaves 0,"}},
		{"more than what is available", disk, 30 * Gi, 30 * Gi, []string{"leaves -20Gi"}},
		{"a disk at the minimum takes not even an empty replica",
			ActualSpace{Maximum: 100 * Gi, Available: 25 * Gi, MinimalAvailablePercentage: 25}, 0, 0, []string{"leaves 25Gi"}},
		{"minimal 0%: anything while a byte is left",
			ActualSpace{Maximum: 100 * Gi, Available: 1, MinimalAvailablePercentage: 0}, 0, 0, nil},
		{"minimal 0%: nothing available",
			ActualSpace{Maximum: 100 * Gi, Available: 0, MinimalAvailablePercentage: 0}, 0, 0, []string{"no actual space available", "storageAvailable 0"}},
		{"a disk Longhorn has not measured", ActualSpace{}, 0, 0, []string{"no size for the disk", "storageMaximum 0"}},
		{"minimal 100%: never", ActualSpace{Maximum: 100 * Gi, Available: 100 * Gi, MinimalAvailablePercentage: 100}, 0, 0,
			[]string{"not more than the 100Gi"}},
		{"huge grants saturate", ActualSpace{Maximum: math.MaxInt64, Available: math.MaxInt64, MinimalAvailablePercentage: 10},
			math.MaxInt64, math.MaxInt64, []string{"not enough actual space"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.space.Failure(tc.since, tc.actual)
			if (got == "") != (tc.want == nil) {
				t.Fatalf("Failure(%d, %d) = %q, want fits=%v", tc.since, tc.actual, got, tc.want == nil)
			}
			for _, part := range tc.want {
				if !strings.Contains(got, part) {
					t.Errorf("message %q does not say %q", got, part)
				}
			}
			// The rule is HasActualSpace with the grants since added.
			if fits := HasActualSpace(tc.space.Available, AddSat(tc.since, tc.actual), tc.space.Maximum, tc.space.MinimalAvailablePercentage); fits != (got == "") {
				t.Errorf("HasActualSpace says %v, Failure says %q", fits, got)
			}
		})
	}
}

// The ledger rejects a new replica that Longhorn's actual-space rule would
// refuse, counting what it granted since Longhorn measured the disk; the
// disk is 100Gi with 40Gi available and storage-minimal-available-percentage
// 25 (25Gi kept free), over-provisioning 200% (limit 200Gi), so the limit
// alone would grant every request below.
func TestDecideActualSpace(t *testing.T) {
	space := func(counted ...string) *ActualSpace {
		s := &ActualSpace{Maximum: 100 * Gi, Available: 40 * Gi, MinimalAvailablePercentage: 25,
			Replicas: map[string]bool{}, BackingImages: map[string]bool{}}
		for _, name := range counted {
			s.Replicas[name] = true
			s.BackingImages[name] = true
		}
		return s
	}
	const limit = 200 * Gi // (100Gi − 0) × 200%
	for _, tc := range []struct {
		name     string
		space    *ActualSpace
		spec     dsv1.DiskScheduleSpec
		previous dsv1.DiskScheduleStatus
		actual   map[string]int64
		want     map[string]dsv1.RequestState
		// message names a rejected replica and parts of its message.
		message []string
	}{
		{
			name:   "two placements race for the last actual space: the first by name is granted, the other refused",
			space:  space(),
			spec:   dsv1.DiskScheduleSpec{Replicas: map[string]rb{"pvc-a-r-1": rb(50 * Gi), "pvc-b-r-1": rb(50 * Gi)}},
			actual: map[string]int64{"pvc-a-r-1": 10 * Gi, "pvc-b-r-1": 10 * Gi},
			want:   map[string]dsv1.RequestState{"pvc-a-r-1": dsv1.RequestStateScheduled, "pvc-b-r-1": dsv1.RequestStateRejected},
			message: []string{"pvc-b-r-1", "40Gi available as Longhorn last measured it, less 10Gi granted here since and 10Gi of the replica's data, leaves 20Gi",
				"not more than the 25Gi that storage-minimal-available-percentage 25% of 100Gi keeps free"},
		},
		{
			name:     "a grant Longhorn's status does not count yet takes its data from the measure",
			space:    space(),
			spec:     dsv1.DiskScheduleSpec{Replicas: map[string]rb{"pvc-a-r-1": rb(50 * Gi), "pvc-b-r-1": rb(50 * Gi)}},
			previous: dsv1.DiskScheduleStatus{Replicas: map[string]dsv1.RequestStatus{"pvc-a-r-1": granted(50 * Gi)}},
			actual:   map[string]int64{"pvc-a-r-1": 10 * Gi, "pvc-b-r-1": 10 * Gi},
			want:     map[string]dsv1.RequestState{"pvc-a-r-1": dsv1.RequestStateScheduled, "pvc-b-r-1": dsv1.RequestStateRejected},
			message:  []string{"pvc-b-r-1", "less 10Gi granted here since"},
		},
		{
			name:     "a grant Longhorn counted is in its measure already",
			space:    space("pvc-a-r-1"),
			spec:     dsv1.DiskScheduleSpec{Replicas: map[string]rb{"pvc-a-r-1": rb(50 * Gi), "pvc-b-r-1": rb(50 * Gi)}},
			previous: dsv1.DiskScheduleStatus{Replicas: map[string]dsv1.RequestStatus{"pvc-a-r-1": granted(50 * Gi)}},
			actual:   map[string]int64{"pvc-a-r-1": 10 * Gi, "pvc-b-r-1": 10 * Gi},
			want:     map[string]dsv1.RequestState{"pvc-a-r-1": dsv1.RequestStateScheduled, "pvc-b-r-1": dsv1.RequestStateScheduled},
		},
		{
			name:   "empty volumes take no actual space: both fit",
			space:  space(),
			spec:   dsv1.DiskScheduleSpec{Replicas: map[string]rb{"pvc-a-r-1": rb(50 * Gi), "pvc-b-r-1": rb(50 * Gi)}},
			actual: map[string]int64{},
			want:   map[string]dsv1.RequestState{"pvc-a-r-1": dsv1.RequestStateScheduled, "pvc-b-r-1": dsv1.RequestStateScheduled},
		},
		{
			name:     "a backing-image copy granted since takes its size",
			space:    space(),
			spec:     dsv1.DiskScheduleSpec{Replicas: map[string]rb{"pvc-b-r-1": rb(50 * Gi)}, BackingImages: map[string]rb{"image": rb(6 * Gi)}},
			previous: dsv1.DiskScheduleStatus{BackingImages: map[string]dsv1.RequestStatus{"image": granted(6 * Gi)}},
			actual:   map[string]int64{"pvc-b-r-1": 10 * Gi},
			want:     map[string]dsv1.RequestState{"pvc-b-r-1": dsv1.RequestStateRejected},
			message:  []string{"pvc-b-r-1", "less 6Gi granted here since"},
		},
		{
			name:     "a growth is not held to it (Longhorn checks an expansion itself)",
			space:    space(),
			spec:     dsv1.DiskScheduleSpec{Replicas: map[string]rb{"pvc-a-r-1": rb(80 * Gi)}},
			previous: dsv1.DiskScheduleStatus{Replicas: map[string]dsv1.RequestStatus{"pvc-a-r-1": granted(50 * Gi)}},
			actual:   map[string]int64{"pvc-a-r-1": 30 * Gi},
			want:     map[string]dsv1.RequestState{"pvc-a-r-1": dsv1.RequestStateScheduled},
		},
		{
			name:   "a disk without the space measured is not held to it",
			space:  nil,
			spec:   dsv1.DiskScheduleSpec{Replicas: map[string]rb{"pvc-a-r-1": rb(50 * Gi)}},
			actual: map[string]int64{"pvc-a-r-1": 39 * Gi},
			want:   map[string]dsv1.RequestState{"pvc-a-r-1": dsv1.RequestStateScheduled},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			disk := okDisk(limit)
			disk.Space = tc.space
			prev := tc.previous
			prev.StorageScheduled = scheduledSum(prev)
			prev.StorageLimit = limit
			out, _ := decide(t, Input{Spec: tc.spec, Generation: 2, Previous: prev, Disk: disk, ActualSizes: tc.actual, Now: t0})
			for name, state := range tc.want {
				if got := out.Replicas[name].State; got != state {
					t.Errorf("replica %s: %s (%s), want %s", name, got, out.Replicas[name].Message, state)
				}
			}
			if len(tc.message) > 0 {
				msg := out.Replicas[tc.message[0]].Message
				for _, part := range tc.message[1:] {
					if !strings.Contains(msg, part) {
						t.Errorf("message %q does not say %q", msg, part)
					}
				}
			}
			if out.StorageScheduled > limit {
				t.Errorf("storageScheduled %s over the limit %s", Bytes(out.StorageScheduled), Bytes(limit))
			}
		})
	}
}

// A replica Longhorn already persisted is adopted even when the disk's
// actual space is short (rule 7): the ledger counts what is there.
func TestDecideAdoptionIgnoresActualSpace(t *testing.T) {
	disk := okDisk(200 * Gi)
	disk.Space = &ActualSpace{Maximum: 100 * Gi, Available: 20 * Gi, MinimalAvailablePercentage: 25}
	out, oc := decide(t, Input{
		Spec:        dsv1.DiskScheduleSpec{Replicas: map[string]rb{"pvc-a-r-1": rb(50 * Gi)}},
		Generation:  1,
		Disk:        disk,
		Persisted:   Owners{Replicas: map[string]bool{"pvc-a-r-1": true}},
		ActualSizes: map[string]int64{"pvc-a-r-1": 10 * Gi},
		Now:         t0,
	})
	wantOutcome(t, oc, 1, 0, 0, 1)
	if st := out.Replicas["pvc-a-r-1"]; st.State != dsv1.RequestStateScheduled || st.ScheduledSize != 50*Gi {
		t.Errorf("persisted replica: %+v, want adopted at 50Gi", st)
	}
}
