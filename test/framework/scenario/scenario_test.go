package scenario

import (
	"strings"
	"testing"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

const gi = int64(1) << 30

func ledgerOf(scheduled, limit int64, replicas map[string]dsv1.RequestStatus, conds ...metav1.Condition) *dsv1.DiskSchedule {
	return &dsv1.DiskSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: "disk-uuid", Namespace: "longhorn-system"},
		Spec:       dsv1.DiskScheduleSpec{Name: "disk-1", NodeID: "node-1"},
		Status: dsv1.DiskScheduleStatus{
			StorageScheduled: scheduled, StorageLimit: limit, Replicas: replicas, Conditions: conds,
		},
	}
}

func granted(size int64) dsv1.RequestStatus {
	return dsv1.RequestStatus{State: dsv1.RequestStateScheduled, RequestedSize: size, ScheduledSize: size}
}

// TestLedgerMonitorCounts checks that the monitor counts each decision once,
// ignores what the baseline already held, and records violations.
func TestLedgerMonitorCounts(t *testing.T) {
	m := &ledgerMonitor{rv: map[string]string{}, states: map[string]map[entry]string{}, rows: map[string]*LedgerRow{}}
	version := func(rv string, ds *dsv1.DiskSchedule) *dsv1.DiskSchedule {
		ds.ResourceVersion = rv
		return ds
	}
	rejected := dsv1.RequestStatus{State: dsv1.RequestStateRejected, RequestedSize: 100 * gi}
	m.see(version("1", ledgerOf(100*gi, 400*gi, map[string]dsv1.RequestStatus{"old": granted(100 * gi)})), true)
	m.see(version("2", ledgerOf(200*gi, 400*gi, map[string]dsv1.RequestStatus{"old": granted(100 * gi), "r1": granted(100 * gi)})), false)
	m.see(version("2", ledgerOf(200*gi, 400*gi, map[string]dsv1.RequestStatus{"old": granted(100 * gi), "r1": granted(100 * gi)})), false)
	m.see(version("3", ledgerOf(200*gi, 400*gi, map[string]dsv1.RequestStatus{"old": granted(100 * gi), "r1": granted(100 * gi), "r2": rejected})), false)
	ds := version("4", ledgerOf(500*gi, 400*gi, map[string]dsv1.RequestStatus{"r1": granted(500 * gi)}))
	ds.Status.Reservations = map[string]dsv1.ReservationStatus{"vol": {State: dsv1.ReservationStateScheduled}}
	m.see(ds, false)

	row := m.rows["disk-uuid"]
	if row.Granted != 1 || row.Rejected != 1 || row.Reserved != 1 {
		t.Errorf("granted/rejected/reserved = %d/%d/%d, want 1/1/1", row.Granted, row.Rejected, row.Reserved)
	}
	if m.versions != 3 {
		t.Errorf("versions = %d, want 3 (the baseline and a repeated version do not count)", m.versions)
	}
	if len(m.violations) != 1 || !strings.Contains(m.violations[0], "version 4") {
		t.Errorf("violations = %q, want one, of version 4", m.violations)
	}
	if row.Scheduled != 500*gi || row.Limit != 400*gi || row.Node != "node-1" || row.Disk != "disk-1" {
		t.Errorf("row = %+v, want the last version's figures", row)
	}
}

func TestUnsettled(t *testing.T) {
	vol := func(nodeID string, sched lhv1.ConditionStatus, reason string) *lhv1.Volume {
		return &lhv1.Volume{
			ObjectMeta: metav1.ObjectMeta{Name: "vol", Generation: 2},
			Spec:       lhv1.VolumeSpec{NumberOfReplicas: 1, NodeID: nodeID},
			Status: lhv1.VolumeStatus{Conditions: []lhv1.Condition{
				{Type: lhv1.VolumeConditionTypeScheduled, Status: sched, Reason: reason},
			}},
		}
	}
	replica := func(name, node, disk string, state lhv1.InstanceState) *lhv1.Replica {
		r := &lhv1.Replica{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "longhorn-system"},
			Spec:       lhv1.ReplicaSpec{DiskID: disk},
		}
		r.Spec.VolumeName, r.Spec.VolumeSize, r.Spec.NodeID = "vol", 100*gi, node
		r.Status.CurrentState = state
		if state == lhv1.InstanceStateRunning {
			r.Spec.HealthyAt = "2026-11-27T10:00:00Z"
		}
		return r
	}
	notHealthyYet := func(r *lhv1.Replica) *lhv1.Replica {
		r.Spec.HealthyAt = ""
		return r
	}
	pinnedTo := func(node string, r *lhv1.Replica) *lhv1.Replica {
		r.Spec.HardNodeAffinity = node
		return r
	}
	// bestEffort is vol with best-effort data locality, attached on its node.
	bestEffort := func(v *lhv1.Volume) *lhv1.Volume {
		v.Spec.DataLocality = lhv1.DataLocalityBestEffort
		v.Status.State, v.Status.CurrentNodeID = lhv1.VolumeStateAttached, v.Spec.NodeID
		return v
	}
	ledgers := objects{}
	for _, d := range []struct{ uuid, node, replica string }{{"d1", "node-1", "local"}, {"d2", "node-2", "remote"}} {
		ledgers["longhorn-system/"+d.uuid] = &dsv1.DiskSchedule{
			ObjectMeta: metav1.ObjectMeta{Name: d.uuid, Namespace: "longhorn-system"},
			Spec:       dsv1.DiskScheduleSpec{Name: "disk-1", NodeID: d.node},
			Status:     dsv1.DiskScheduleStatus{Replicas: map[string]dsv1.RequestStatus{d.replica: granted(100 * gi)}},
		}
	}
	running := lhv1.InstanceStateRunning
	for _, tt := range []struct {
		name     string
		vol      *lhv1.Volume
		replicas []*lhv1.Replica
		settled  bool
	}{
		{"local and running", vol("node-1", lhv1.ConditionStatusTrue, ""), []*lhv1.Replica{replica("local", "node-1", "d1", running)}, true},
		{"not running yet", vol("node-1", lhv1.ConditionStatusTrue, ""), []*lhv1.Replica{replica("local", "node-1", "d1", "")}, false},
		{"running, not reported healthy yet", vol("node-1", lhv1.ConditionStatusTrue, ""), []*lhv1.Replica{notHealthyYet(replica("local", "node-1", "d1", running))}, false},
		{"best-effort, attached, its replica elsewhere, no local one asked for yet", bestEffort(vol("node-1", lhv1.ConditionStatusTrue, "")),
			[]*lhv1.Replica{replica("remote", "node-2", "d2", running)}, false},
		{"best-effort, attached, its local replica reported unschedulable", bestEffort(vol("node-1", lhv1.ConditionStatusFalse, lhv1.VolumeConditionReasonReplicaSchedulingFailure)),
			[]*lhv1.Replica{replica("remote", "node-2", "d2", running), pinnedTo("node-1", replica("pinned", "", "", ""))}, true},
		{"best-effort, attached, local", bestEffort(vol("node-1", lhv1.ConditionStatusTrue, "")), []*lhv1.Replica{replica("local", "node-1", "d1", running)}, true},
		{"not granted", vol("node-1", lhv1.ConditionStatusTrue, ""), []*lhv1.Replica{replica("other", "node-1", "d1", running)}, false},
		{"remote kept, local replica reported unschedulable", vol("node-1", lhv1.ConditionStatusFalse, lhv1.VolumeConditionReasonReplicaSchedulingFailure),
			[]*lhv1.Replica{replica("remote", "node-2", "d2", running), replica("pinned", "", "", "")}, true},
		{"local replica not placed yet", vol("node-1", lhv1.ConditionStatusTrue, ""),
			[]*lhv1.Replica{replica("remote", "node-2", "d2", running), replica("pinned", "", "", "")}, false},
		{"surplus remote next to a local one", vol("node-1", lhv1.ConditionStatusTrue, ""),
			[]*lhv1.Replica{replica("local", "node-1", "d1", running), replica("remote", "node-2", "d2", running)}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			why := unsettled(tt.vol, tt.replicas, ledgers)
			if (why == "") != tt.settled {
				t.Errorf("unsettled() = %q, want settled %v", why, tt.settled)
			}
		})
	}
}
