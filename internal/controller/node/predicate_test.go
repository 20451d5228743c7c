package node

import (
	"testing"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/event"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

// TestEventsThatMatter: the node controller is woken by what changes its
// decision only, not by Longhorn's status writes on every disk measurement
// nor by every decision of the ledger controller.
func TestEventsThatMatter(t *testing.T) {
	const gi = int64(1) << 30
	fixture := testenv.NodeFixture{Name: "node-1", Disks: map[string]testenv.Disk{"disk-1": {UUID: "uuid-1", Size: 100 * gi}}}
	node := fixture.LonghornNode("longhorn-system")
	measured := node.DeepCopy()
	measured.Status.DiskStatus["disk-1"].StorageAvailable -= gi
	measured.Status.DiskStatus["disk-1"].StorageScheduled += gi
	grown := node.DeepCopy()
	grown.Status.DiskStatus["disk-2"] = &lhv1.DiskStatus{DiskUUID: "uuid-2"}
	nodes := disksChanged()
	if nodes.Update(event.UpdateEvent{ObjectOld: node, ObjectNew: measured}) {
		t.Error("a Longhorn Node's new disk measurement woke the node controller")
	}
	if !nodes.Update(event.UpdateEvent{ObjectOld: node, ObjectNew: grown}) {
		t.Error("a disk added to a Longhorn Node did not wake the node controller")
	}

	ds := &dsv1.DiskSchedule{Spec: dsv1.DiskScheduleSpec{Name: "disk-1", NodeID: "node-1",
		Replicas: map[string]dsv1.RequestedBytes{"r-1": dsv1.RequestedBytes(gi)}}}
	decided := ds.DeepCopy()
	decided.Status.StorageScheduled = gi
	more := decided.DeepCopy()
	more.Spec.Replicas["r-2"] = dsv1.RequestedBytes(gi)
	empty := &dsv1.DiskSchedule{Spec: dsv1.DiskScheduleSpec{Name: "disk-1", NodeID: "node-1"}}
	ledgers := ledgerLifeChanged()
	if ledgers.Update(event.UpdateEvent{ObjectOld: decided, ObjectNew: more}) {
		t.Error("a new request on a granting ledger woke the node controller")
	}
	if !ledgers.Update(event.UpdateEvent{ObjectOld: decided, ObjectNew: empty}) {
		t.Error("a ledger that no longer grants anything did not wake the node controller")
	}
}
