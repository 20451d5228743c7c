package scenario

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

func TestCapacityBehind(t *testing.T) {
	ready := metav1.Condition{Type: dsv1.DiskScheduleConditionReady, Status: metav1.ConditionTrue}
	disk := func(node string, scheduled, limit int64, conds ...metav1.Condition) *dsv1.DiskSchedule {
		ds := ledgerOf(scheduled, limit, nil, conds...)
		ds.Spec.NodeID = node
		return ds
	}
	node := func(name, zone string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			corev1.LabelHostname: name, corev1.LabelTopologyZone: zone, "other": "x"}}}
	}
	published := func(class, node, zone string, capacity int64) *storagev1.CSIStorageCapacity {
		return &storagev1.CSIStorageCapacity{
			StorageClassName: class,
			NodeTopology:     &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelHostname: node, corev1.LabelTopologyZone: zone}},
			Capacity:         resource.NewQuantity(capacity, resource.BinarySI),
		}
	}
	nodes := []*corev1.Node{node("n1", "a"), node("n2", "b")}
	ledgers := []*dsv1.DiskSchedule{
		disk("n1", 0, 400*gi, ready),
		disk("n2", 100*gi, 100*gi, ready), disk("n2", 50*gi, 200*gi, ready), disk("n2", 0, 300*gi), // the last one not Ready
	}
	for _, tt := range []struct {
		name string
		caps []*storagev1.CSIStorageCapacity
		want string
	}{
		{"current", []*storagev1.CSIStorageCapacity{published("c", "n1", "a", 400*gi), published("c", "n2", "b", 150*gi), published("other", "n1", "a", 0)}, ""},
		{"lagging", []*storagev1.CSIStorageCapacity{published("c", "n1", "a", 0), published("c", "n2", "b", 150*gi)}, "node n1: 0 published, 400Gi free"},
		{"missing", []*storagev1.CSIStorageCapacity{published("c", "n1", "a", 400*gi)}, "no CSIStorageCapacity of class c for node n2"},
		{"another node's topology", []*storagev1.CSIStorageCapacity{published("c", "n1", "a", 400*gi), published("c", "n2", "a", 150*gi)}, "for node n2"},
		{"twice", []*storagev1.CSIStorageCapacity{published("c", "n1", "a", 400*gi), published("c", "n1", "a", 400*gi)}, "2 CSIStorageCapacity objects"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := capacityBehind("c", nodes, ledgers, tt.caps)
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("capacityBehind() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestUnevenWork(t *testing.T) {
	got := UnevenWork([]string{"node-4", "node-2", "node-1", "node-3"})
	if strings.Join(got.Nodes, ",") != "node-1,node-3" || got.Share != DefaultOtherWorkShare {
		t.Errorf("UnevenWork = %+v, want node-1 and node-3 at %v", got, DefaultOtherWorkShare)
	}
}
