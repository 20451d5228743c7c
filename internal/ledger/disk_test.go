package ledger

import (
	"reflect"
	"strings"
	"testing"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

// longhornNode returns a Longhorn Node with one healthy disk "disk-0" of
// 100Gi, 10Gi reserved, UUID "uuid-0", as Longhorn reports it.
func longhornNode() *lhv1.Node {
	cond := func(typ string) lhv1.Condition {
		return lhv1.Condition{Type: typ, Status: lhv1.ConditionStatusTrue, LastTransitionTime: "2026-01-02T03:04:05Z"}
	}
	return &lhv1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-0"},
		Spec: lhv1.NodeSpec{AllowScheduling: true, Disks: map[string]lhv1.DiskSpec{
			"disk-0": {Type: lhv1.DiskTypeFilesystem, Path: "/var/lib/longhorn/", AllowScheduling: true, StorageReserved: 10 * Gi},
		}},
		Status: lhv1.NodeStatus{
			Conditions: []lhv1.Condition{cond(lhv1.NodeConditionTypeReady), cond(lhv1.NodeConditionTypeSchedulable)},
			DiskStatus: map[string]*lhv1.DiskStatus{"disk-0": {
				DiskUUID: "uuid-0", StorageMaximum: 100 * Gi, StorageAvailable: 100 * Gi,
				Conditions: []lhv1.Condition{cond(lhv1.DiskConditionTypeReady), cond(lhv1.DiskConditionTypeSchedulable)},
			}},
		},
	}
}

func TestDiskOf(t *testing.T) {
	setCond := func(conds []lhv1.Condition, typ, reason string) {
		for i := range conds {
			if conds[i].Type == typ {
				conds[i].Status, conds[i].Reason, conds[i].Message = lhv1.ConditionStatusFalse, reason, "Longhorn says why"
			}
		}
	}
	for _, tc := range []struct {
		name   string
		change func(n *lhv1.Node)
		found  bool
		reason string
		msg    string
	}{
		{"schedulable", nil, true, dsv1.DiskScheduleReasonSchedulable, ""},
		{"node not ready", func(n *lhv1.Node) {
			setCond(n.Status.Conditions, lhv1.NodeConditionTypeReady, "KubernetesNodeNotReady")
		},
			true, dsv1.DiskScheduleReasonNodeNotReady, "KubernetesNodeNotReady"},
		{"node without conditions", func(n *lhv1.Node) { n.Status.Conditions = nil },
			true, dsv1.DiskScheduleReasonNodeNotReady, "no condition reported"},
		{"node cordoned", func(n *lhv1.Node) {
			setCond(n.Status.Conditions, lhv1.NodeConditionTypeSchedulable, lhv1.NodeConditionReasonKubernetesNodeCordoned)
		}, true, dsv1.DiskScheduleReasonNodeUnschedulable, lhv1.NodeConditionReasonKubernetesNodeCordoned},
		{"node scheduling disabled", func(n *lhv1.Node) { n.Spec.AllowScheduling = false },
			true, dsv1.DiskScheduleReasonNodeSchedulingDisabled, "node-0"},
		{"node eviction", func(n *lhv1.Node) { n.Spec.EvictionRequested = true },
			true, dsv1.DiskScheduleReasonNodeEvictionRequested, "node-0"},
		{"disk scheduling disabled", func(n *lhv1.Node) {
			d := n.Spec.Disks["disk-0"]
			d.AllowScheduling = false
			n.Spec.Disks["disk-0"] = d
		}, true, dsv1.DiskScheduleReasonDiskSchedulingDisabled, "disk-0"},
		{"disk eviction", func(n *lhv1.Node) {
			d := n.Spec.Disks["disk-0"]
			d.EvictionRequested = true
			n.Spec.Disks["disk-0"] = d
		}, true, dsv1.DiskScheduleReasonDiskEvictionRequested, "disk-0"},
		{"disk not ready", func(n *lhv1.Node) {
			setCond(n.Status.DiskStatus["disk-0"].Conditions, lhv1.DiskConditionTypeReady, lhv1.DiskConditionReasonDiskNotReady)
		}, true, dsv1.DiskScheduleReasonDiskNotReady, lhv1.DiskConditionReasonDiskNotReady},
		{"disk under pressure is still schedulable for the ledger", func(n *lhv1.Node) {
			setCond(n.Status.DiskStatus["disk-0"].Conditions, lhv1.DiskConditionTypeSchedulable, lhv1.DiskConditionReasonDiskPressure)
		}, true, dsv1.DiskScheduleReasonSchedulable, ""},
		{"disk gone from spec", func(n *lhv1.Node) { delete(n.Spec.Disks, "disk-0") }, false, dsv1.DiskScheduleReasonDiskNotFound, "uuid-0"},
		{"disk gone from status", func(n *lhv1.Node) { delete(n.Status.DiskStatus, "disk-0") }, false, dsv1.DiskScheduleReasonDiskNotFound, "uuid-0"},
		{"another disk behind the name", func(n *lhv1.Node) { n.Status.DiskStatus["disk-0"].DiskUUID = "uuid-1" },
			false, dsv1.DiskScheduleReasonDiskNotFound, "uuid-0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := longhornNode()
			if tc.change != nil {
				tc.change(n)
			}
			d, found := DiskOf(n, "disk-0", "uuid-0", 150, 25)
			if found != tc.found || d.Reason != tc.reason || d.Schedulable != (tc.reason == dsv1.DiskScheduleReasonSchedulable) {
				t.Errorf("DiskOf = %+v, found %v; want reason %s, found %v", d, found, tc.reason, tc.found)
			}
			if !strings.Contains(d.Message, tc.msg) {
				t.Errorf("message %q does not contain %q", d.Message, tc.msg)
			}
			if want := int64(135 * Gi); found && d.Limit != want {
				t.Errorf("limit %d, want (100Gi − 10Gi) × 150%% = %d", d.Limit, want)
			}
		})
	}
	if d, found := DiskOf(nil, "disk-0", "uuid-0", 100, 25); found || d.Schedulable || d.Reason != dsv1.DiskScheduleReasonDiskNotFound {
		t.Errorf("DiskOf(nil) = %+v, %v", d, found)
	}

	// The actual space is Longhorn's last measure, with what it had counted then.
	n := longhornNode()
	st := n.Status.DiskStatus["disk-0"]
	st.StorageAvailable = 40 * Gi
	st.ScheduledReplica = map[string]int64{"pvc-a-r-0a1b2c3d": 10 * Gi}
	st.ScheduledBackingImage = map[string]int64{"default-image-x7k2p": Gi}
	d, _ := DiskOf(n, "disk-0", "uuid-0", 150, 25)
	want := &ActualSpace{Maximum: 100 * Gi, Available: 40 * Gi, MinimalAvailablePercentage: 25,
		Replicas: map[string]bool{"pvc-a-r-0a1b2c3d": true}, BackingImages: map[string]bool{"default-image-x7k2p": true}}
	if !reflect.DeepEqual(d.Space, want) {
		t.Errorf("actual space %+v, want %+v", d.Space, want)
	}
}
