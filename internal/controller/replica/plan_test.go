package replica

import (
	"reflect"
	"strings"
	"testing"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/requirement"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

const gi = int64(1) << 30

// ask is the request of a replica of volume for size bytes, admitted at
// version, on the disk its spec.diskID names.
func ask(replica, volume string, size int64, version string) *requirement.Request {
	return &requirement.Request{Kind: ledger.Replica, Name: replica, Volume: volume, Size: size, Version: version, Confirm: true}
}

// What a Replica write of Longhorn's asks of its disk's ledger: the
// replica's own volumeSize, nothing for its backing image's copy (asked
// when Longhorn adds the disk to the image), and nothing for a clone that
// shares its disk and data directory with a replica of its volume.
func TestPlan(t *testing.T) {
	const ns, disk, other = "longhorn-system", "uuid-0", "uuid-1"
	unscheduled := func(name, volume string, size int64) *lhv1.Replica {
		return testenv.Replica(ns, name, testenv.ReplicaFixture{Volume: volume, Size: size})
	}
	placed := func(name, volume string, size int64, uuid string) *lhv1.Replica {
		return testenv.Replica(ns, name, testenv.ReplicaFixture{Volume: volume, Size: size, NodeID: "node-0", DiskName: "disk-0", DiskID: uuid,
			State: lhv1.InstanceStateRunning})
	}
	withImage := func(r *lhv1.Replica) *lhv1.Replica { r.Spec.BackingImage = "default-image-x7k2p"; return r }
	withVersion := func(r *lhv1.Replica, rv string) *lhv1.Replica { v := r.DeepCopy(); v.ResourceVersion = rv; return v }
	// clone is what Longhorn's volume controller creates for a v1 live
	// migration or a live engine upgrade (duplicateReplica): a new name,
	// the same spec, disk and data directory.
	clone := func(r *lhv1.Replica, name string) *lhv1.Replica {
		c := r.DeepCopy()
		c.Name, c.ResourceVersion = name, ""
		c.Spec.Active = false
		return c
	}
	grown := func(r *lhv1.Replica, size int64) *lhv1.Replica { g := r.DeepCopy(); g.Spec.VolumeSize = size; return g }
	moved := func(r *lhv1.Replica, uuid string) *lhv1.Replica {
		m := r.DeepCopy()
		m.Spec.DiskID, m.Spec.DataDirectoryName = uuid, r.Spec.VolumeName+"-9f8e7d6c"
		return m
	}
	original := placed("pvc-a-r-0a1b2c3d", "pvc-a", 60*gi, disk)
	sibling := placed("pvc-a-r-4e5f6a7b", "pvc-a", 60*gi, other)
	// A full disk: 100Gi granted of a 100Gi limit, pvc-a-r-0a1b2c3d among them.
	full := &dsv1.DiskSchedule{Spec: dsv1.DiskScheduleSpec{Name: "disk-0", NodeID: "node-0",
		Replicas: map[string]dsv1.RequestedBytes{original.Name: dsv1.RequestedBytes(60 * gi), "pvc-b-r-1": dsv1.RequestedBytes(40 * gi)}}}
	for _, tc := range []struct {
		name     string
		old, rep *lhv1.Replica
		siblings []*lhv1.Replica
		ds       *dsv1.DiskSchedule
		// want is the ask, nil when the write asks nothing; reason is part
		// of the reason then.
		want   *requirement.Request
		reason string
	}{
		{name: "a replica placed on a disk asks its volumeSize",
			old: unscheduled("pvc-c-r-1", "pvc-c", 10*gi), rep: placed("pvc-c-r-1", "pvc-c", 10*gi, disk),
			want: ask("pvc-c-r-1", "pvc-c", 10*gi, "")},
		{name: "a placement records the resourceVersion its write is admitted at",
			old: withVersion(unscheduled("pvc-c-r-1", "pvc-c", 10*gi), "4711"), rep: withVersion(placed("pvc-c-r-1", "pvc-c", 10*gi, disk), "4711"),
			want: ask("pvc-c-r-1", "pvc-c", 10*gi, "4711")},
		{name: "a growth records none: the replica is on the disk already",
			old: withVersion(original, "4711"), rep: withVersion(grown(original, 80*gi), "4711"), siblings: []*lhv1.Replica{original}, ds: full,
			want: ask(original.Name, "pvc-a", 80*gi, "")},
		{name: "a replica with a backing image asks its volumeSize alone",
			old: withImage(unscheduled("pvc-c-r-1", "pvc-c", 10*gi)), rep: withImage(placed("pvc-c-r-1", "pvc-c", 10*gi, disk)),
			want: ask("pvc-c-r-1", "pvc-c", 10*gi, "")},
		{name: "a replica created on a disk asks its volumeSize",
			rep:  placed("pvc-c-r-1", "pvc-c", 10*gi, disk),
			want: ask("pvc-c-r-1", "pvc-c", 10*gi, "")},
		{name: "a migration clone on a full disk takes no new space",
			rep: clone(original, "pvc-a-r-8c9d0e1f"), siblings: []*lhv1.Replica{original, sibling}, ds: full,
			reason: "shares disk uuid-0 and data directory " + original.Spec.DataDirectoryName + " with replica pvc-a-r-0a1b2c3d of volume pvc-a: it takes no new space"},
		{name: "a clone of a replica the ledger does not count yet takes no new space either",
			rep: clone(original, "pvc-a-r-00000000"), siblings: []*lhv1.Replica{original}, ds: &dsv1.DiskSchedule{},
			reason: "with replica pvc-a-r-0a1b2c3d"},
		{name: "a clone of a replica on another disk takes space",
			rep: clone(sibling, "pvc-a-r-8c9d0e1f"), siblings: []*lhv1.Replica{original}, ds: full,
			want: ask("pvc-a-r-8c9d0e1f", "pvc-a", 60*gi, "")},
		{name: "a replica of another volume in a directory of the same name takes space",
			rep: func() *lhv1.Replica {
				r := clone(original, "pvc-z-r-1")
				r.Spec.VolumeName = "pvc-z"
				return r
			}(), siblings: nil, ds: full,
			want: ask("pvc-z-r-1", "pvc-z", 60*gi, "")},
		{name: "the clone grows with the replica counted for the directory",
			old: clone(original, "pvc-a-r-8c9d0e1f"), rep: grown(clone(original, "pvc-a-r-8c9d0e1f"), 80*gi),
			siblings: []*lhv1.Replica{original, clone(original, "pvc-a-r-8c9d0e1f")}, ds: full,
			reason: "with replica pvc-a-r-0a1b2c3d"},
		{name: "the replica counted for a shared directory asks its growth",
			old: original, rep: grown(original, 80*gi), siblings: []*lhv1.Replica{original, clone(original, "pvc-a-r-8c9d0e1f")}, ds: full,
			want: ask(original.Name, "pvc-a", 80*gi, "")},
		{name: "a replica moved to another disk asks there",
			old: original, rep: moved(original, other), siblings: []*lhv1.Replica{original}, ds: full,
			want: ask(original.Name, "pvc-a", 60*gi, "")},
		{name: "a replica that stays and does not grow asks nothing",
			old: original, rep: original, ds: full, reason: "takes no new space"},
		{name: "an unscheduled replica asks nothing",
			rep: unscheduled("pvc-c-r-1", "pvc-c", 10*gi), reason: "no disk yet"},
		{name: "a replica of no size asks nothing",
			rep: placed("pvc-c-r-1", "pvc-c", 0, disk), reason: "no space"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			siblings := make([]lhv1.Replica, 0, len(tc.siblings))
			for _, s := range tc.siblings {
				siblings = append(siblings, *s)
			}
			if tc.want != nil {
				want := *tc.want
				want.Disk = tc.rep.Spec.DiskID
				want.Words = Words(want.Name, want.Size, want.Disk)
				tc.want = &want
			}
			plan := Plan(tc.old, tc.rep, siblings, tc.ds)
			var got *requirement.Request
			reason := ""
			switch {
			case plan.Answer != nil:
				if !plan.Answer.Allowed || len(plan.Requests) != 0 {
					t.Errorf("a write that asks nothing is answered %+v with requests %+v", *plan.Answer, plan.Requests)
				}
				reason = plan.Answer.Message
			case len(plan.Requests) != 1:
				t.Fatalf("a replica write asks %d requests, want one: %+v", len(plan.Requests), plan.Requests)
			default:
				got = &plan.Requests[0]
				if !plan.KeepUndecided {
					t.Error("a replica's request not decided in time is put back; Longhorn's retry would ask afresh")
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ask %+v (%q), want %+v", got, reason, tc.want)
			}
			if !strings.Contains(reason, tc.reason) || (tc.want == nil) != (reason != "") {
				t.Errorf("reason %q does not say %q", reason, tc.reason)
			}
		})
	}
}

// A replica's plan answers a dry run from the ledger it read, and says
// each outcome in the ledger's numbers.
func TestPlanAnswers(t *testing.T) {
	const ns = "longhorn-system"
	old := testenv.Replica(ns, "pvc-c-r-1", testenv.ReplicaFixture{Volume: "pvc-c", Size: 10 * gi})
	rep := testenv.Replica(ns, "pvc-c-r-1", testenv.ReplicaFixture{Volume: "pvc-c", Size: 10 * gi, NodeID: "node-0", DiskName: "disk-0", DiskID: "uuid-0"})
	ledgerWith := func(st *dsv1.RequestStatus) *dsv1.DiskSchedule {
		ds := &dsv1.DiskSchedule{Spec: dsv1.DiskScheduleSpec{Name: "disk-0", NodeID: "node-0"}}
		if st != nil {
			ds.Spec.Replicas = map[string]dsv1.RequestedBytes{rep.Name: dsv1.RequestedBytes(st.RequestedSize)}
			ds.Status.Replicas = map[string]dsv1.RequestStatus{rep.Name: *st}
		}
		return ds
	}
	granted := ledgerWith(&dsv1.RequestStatus{State: dsv1.RequestStateScheduled, RequestedSize: 10 * gi, ScheduledSize: 10 * gi})
	rejected := ledgerWith(&dsv1.RequestStatus{State: dsv1.RequestStateRejected, RequestedSize: 10 * gi,
		Message: "requested 10Gi, 4Gi free of limit 100Gi"})
	for _, tc := range []struct {
		name    string
		ds      *dsv1.DiskSchedule
		allowed bool
		message string
		warning string
	}{
		{name: "no ledger denies", ds: nil,
			message: "replica pvc-c-r-1 needs 10Gi on disk uuid-0, which has no DiskSchedule yet; it is admitted once the disk's ledger exists"},
		{name: "granted admits", ds: granted, allowed: true, message: "10Gi already granted on disk disk-0 of node node-0"},
		{name: "not granted admits with a warning, asking nothing", ds: ledgerWith(nil), allowed: true,
			message: "dry run: the ledger was not asked", warning: "dry run: 10Gi on disk disk-0 of node node-0 was not requested from the ledger"},
	} {
		t.Run("dry run: "+tc.name, func(t *testing.T) {
			got := Plan(old, rep, nil, tc.ds).DryRun
			if got.Allowed != tc.allowed || got.Message != tc.message || got.Warning != tc.warning {
				t.Errorf("dry run answered %+v, want allowed %v %q (warning %q)", got, tc.allowed, tc.message, tc.warning)
			}
		})
	}
	plan := Plan(old, rep, nil, ledgerWith(nil))
	r := plan.Requests[0]
	for got, want := range map[string]string{
		requirement.Refusal(r, 0, rejected): "replica pvc-c-r-1 needs 10Gi on disk disk-0 of node node-0: requested 10Gi, 4Gi free of limit 100Gi",
		requirement.Refusal(r, 0, ledgerWith(nil)): "replica pvc-c-r-1 needs 10Gi on disk disk-0 of node node-0: " +
			"the request left the ledger before it was decided (withdrawn, or released because the replica moved on and no write can back it)",
		r.Words.Gone:        "replica pvc-c-r-1 needs 10Gi on disk uuid-0, which has no DiskSchedule any more",
		r.Words.Undecided:   "replica pvc-c-r-1 needs 10Gi on disk uuid-0",
		plan.Admitted:       "10Gi granted on disk disk-0 of node node-0",
		plan.AlreadyGranted: "10Gi already granted on disk disk-0 of node node-0",
	} {
		if got != want {
			t.Errorf("said %q, want %q", got, want)
		}
	}
}
