package volume

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

// What a Volume write of Longhorn's asks of its replicas' ledgers: a
// growth of spec.size asks the new size of every replica on a disk, one
// per data directory; anything else asks nothing.
func TestPlan(t *testing.T) {
	const ns = "longhorn-system"
	vol := func(size int64) *lhv1.Volume {
		return testenv.Volume(ns, "pvc-a", testenv.VolumeFixture{Size: size, Replicas: 3, NodeID: "node-0"})
	}
	placed := func(name, disk string) lhv1.Replica {
		return *testenv.Replica(ns, name, testenv.ReplicaFixture{Volume: "pvc-a", Size: 10 * gi, NodeID: "node-" + disk[len(disk)-1:],
			DiskName: "disk-" + disk[len(disk)-1:], DiskID: disk, State: lhv1.InstanceStateRunning})
	}
	unscheduled := *testenv.Replica(ns, "pvc-a-r-cccccccc", testenv.ReplicaFixture{Volume: "pvc-a", Size: 10 * gi})
	a, b := placed("pvc-a-r-bbbbbbbb", "uuid-1"), placed("pvc-a-r-aaaaaaaa", "uuid-0")
	// A clone of a for a live migration: the same disk and data directory.
	clone := *a.DeepCopy()
	clone.Name = "pvc-a-r-dddddddd"
	ledgers := map[string]*dsv1.DiskSchedule{
		"uuid-0": {Spec: dsv1.DiskScheduleSpec{Replicas: map[string]dsv1.RequestedBytes{b.Name: dsv1.RequestedBytes(10 * gi)}}},
		"uuid-1": {Spec: dsv1.DiskScheduleSpec{Replicas: map[string]dsv1.RequestedBytes{a.Name: dsv1.RequestedBytes(10 * gi)}}},
	}
	grow := func(name, disk string) requirement.Request {
		r := requirement.Request{Disk: disk, Kind: ledger.Replica, Name: name, Size: 20 * gi}
		r.Words = words("volume pvc-a grows from 10Gi to 20Gi", r, ledger.Owners{})
		return r
	}
	for _, tc := range []struct {
		name     string
		old, vol *lhv1.Volume
		replicas []lhv1.Replica
		want     []requirement.Request
		reason   string
	}{
		{name: "a growth asks the new size of each replica on a disk, by name",
			old: vol(10 * gi), vol: vol(20 * gi), replicas: []lhv1.Replica{a, unscheduled, b},
			want: []requirement.Request{grow(b.Name, "uuid-0"), grow(a.Name, "uuid-1")}},
		{name: "a clone sharing a data directory grows with the replica counted",
			old: vol(10 * gi), vol: vol(20 * gi), replicas: []lhv1.Replica{clone, a},
			want: []requirement.Request{grow(a.Name, "uuid-1")}},
		{name: "a growth of a volume without replicas on disks asks nothing and is admitted",
			old: vol(10 * gi), vol: vol(20 * gi), replicas: []lhv1.Replica{unscheduled}},
		{name: "a shrink asks nothing", old: vol(20 * gi), vol: vol(10 * gi), replicas: []lhv1.Replica{a}, reason: "does not grow"},
		{name: "a write of the same size asks nothing", old: vol(10 * gi), vol: vol(10 * gi), reason: "does not grow"},
		{name: "a new volume asks nothing", vol: vol(10 * gi), reason: "a new volume has no replica on a disk yet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := Plan(tc.old, tc.vol, tc.replicas, ledgers, nil)
			if tc.reason != "" {
				if plan.Answer == nil || !plan.Answer.Allowed || !strings.Contains(plan.Answer.Message, tc.reason) {
					t.Errorf("answered %+v, want admitted: %q", plan.Answer, tc.reason)
				}
				return
			}
			if plan.Answer != nil || !reflect.DeepEqual(plan.Requests, tc.want) {
				t.Errorf("plan %+v asks %+v, want %+v", plan.Answer, plan.Requests, tc.want)
			}
			if plan.KeepUndecided {
				t.Error("a growth keeps undecided requests: the disks that granted would hold space for a growth refused")
			}
			if !plan.DryRun.Allowed || !strings.Contains(plan.DryRun.Warning, "volume pvc-a grows from 10Gi to 20Gi was not requested") {
				t.Errorf("dry run answered %+v", plan.DryRun)
			}
			if got := plan.Admitted; got != "volume pvc-a grows from 10Gi to 20Gi: granted on every disk of its replicas" || plan.AlreadyGranted != "" {
				t.Errorf("admitted %q (already granted %q)", got, plan.AlreadyGranted)
			}
		})
	}
}
