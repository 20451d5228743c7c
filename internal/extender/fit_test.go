package extender

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/extender/packing"
	"github.com/longhorn/diskschedule/internal/metrics"
	"github.com/longhorn/diskschedule/internal/settings"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

const gi = int64(1) << 30

// longhornNode returns a Longhorn node as longhorn-manager v1.12 writes a
// healthy one, with filesystem disks disk-1, disk-2, … of the given sizes
// whose UUIDs are <name>-uuid-1, ….
func longhornNode(namespace, name string, sizes []int64) *lhv1.Node {
	f := testenv.NodeFixture{Name: name, Disks: map[string]testenv.Disk{}}
	for i, size := range sizes {
		f.Disks[fmt.Sprintf("disk-%d", i+1)] = testenv.Disk{UUID: fmt.Sprintf("%s-uuid-%d", name, i+1), Size: size}
	}
	return f.LonghornNode(namespace)
}

// Indexes of Longhorn's conditions in the fixtures' nodes and disks.
const (
	nodeReady, nodeSchedulable = 0, 1
	diskReady, diskSchedulable = 0, 1
)

// readyLedger returns disk's Ready DiskSchedule with the given limit and usage.
func readyLedger(uuid, disk, node string, limit, scheduled int64) *dsv1.DiskSchedule {
	return &dsv1.DiskSchedule{ObjectMeta: metav1.ObjectMeta{Name: uuid, Namespace: "longhorn-system"},
		Spec: dsv1.DiskScheduleSpec{Name: disk, NodeID: node},
		Status: dsv1.DiskScheduleStatus{StorageLimit: limit, StorageScheduled: scheduled,
			Conditions: []metav1.Condition{{Type: dsv1.DiskScheduleConditionReady, Status: metav1.ConditionTrue}}}}
}

// testNode returns a schedulable node with disks of the given sizes and
// their ledgers (limit = size, used bytes scheduled when used is not nil).
func testNode(name string, sizes []int64, used []int64) (*lhv1.Node, map[string]*dsv1.DiskSchedule) {
	n := longhornNode("longhorn-system", name, sizes)
	ledgers := map[string]*dsv1.DiskSchedule{}
	for i, size := range sizes {
		disk := fmt.Sprintf("disk-%d", i+1)
		uuid := n.Status.DiskStatus[disk].DiskUUID
		var scheduled int64
		if used != nil {
			scheduled = used[i]
		}
		ledgers[uuid] = readyLedger(uuid, disk, name, size, scheduled)
	}
	return n, ledgers
}

func volumes(n int, size int64) []podVolume {
	var out []podVolume
	for i := range n {
		out = append(out, podVolume{Name: fmt.Sprintf("pvc-%d", i), Size: size, ReplicaNodes: map[string]bool{}})
	}
	return out
}

// TestMultiVolumePodFitsOnlyOnTheFourDiskNode is the seed's multi-PVC case:
// four 100Gi volumes and nodes with 1, 2, 3 and 4 disks of 100Gi.
func TestMultiVolumePodFitsOnlyOnTheFourDiskNode(t *testing.T) {
	sched := settings.Default()
	for disks := 1; disks <= 4; disks++ {
		sizes := make([]int64, disks)
		for i := range sizes {
			sizes[i] = 100 * gi
		}
		node, ledgers := testNode(fmt.Sprintf("node-%d", disks), sizes, nil)
		f := evaluateNode(volumes(4, 100*gi), node, ledgers, nil, sched, "default/p", 0)
		if f.OK != (disks == 4) {
			t.Errorf("node with %d disks: fits=%v (%s)", disks, f.OK, f.Reason)
		}
		if disks == 4 {
			used := map[string]bool{}
			for _, uuid := range f.Assignment {
				used[uuid] = true
			}
			if len(f.Assignment) != 4 || len(used) != 4 {
				t.Errorf("want the 4 volumes on 4 different disks, got %v", f.Assignment)
			}
		} else if !strings.Contains(f.Reason, "400Gi") {
			t.Errorf("node with %d disks: the reason should give the numbers, got %q", disks, f.Reason)
		}
	}
}

func TestEvaluateCountsLedgerUsageAndOwnReservations(t *testing.T) {
	sched := settings.Default()
	node, ledgers := testNode("n", []int64{400 * gi}, []int64{350 * gi})
	vols := volumes(1, 100*gi)
	if f := evaluateNode(vols, node, ledgers, nil, sched, "default/p", 0); f.OK || !strings.Contains(f.Reason, "50Gi") {
		t.Errorf("350Gi of 400Gi scheduled: want no fit with 50Gi free in the reason, got %+v", f)
	}
	// The pod's own granted reservation (counted in storageScheduled) is its to use.
	ds := ledgers["n-uuid-1"]
	ds.Spec.Reservations = map[string]dsv1.DiskScheduleReservation{"pvc-0": {Size: 100 * gi, Pod: "default/p"}}
	ds.Status.Reservations = map[string]dsv1.ReservationStatus{"pvc-0": {State: dsv1.ReservationStateScheduled, RequestedSize: 100 * gi, Pod: "default/p", ScheduledSize: 100 * gi}}
	if f := evaluateNode(vols, node, ledgers, nil, sched, "default/p", 0); !f.OK {
		t.Errorf("the pod's own reservation should count as free for it: %+v", f)
	}
	if f := evaluateNode(vols, node, ledgers, nil, sched, "default/other", 0); f.OK {
		t.Errorf("another pod's reservation must not count as free: %+v", f)
	}
	// Pending requests count as taken.
	ds.Spec.Reservations, ds.Status.Reservations = nil, nil
	ds.Status.StorageScheduled = 200 * gi
	ds.Spec.Replicas = map[string]dsv1.RequestedBytes{"r-pending": dsv1.RequestedBytes(150 * gi)}
	if f := evaluateNode(vols, node, ledgers, nil, sched, "default/p", 0); f.OK {
		t.Errorf("200Gi scheduled + 150Gi pending of 400Gi: 100Gi must not fit: %+v", f)
	}
}

// TestEvaluateReadsTheLedgerNotLonghornsTotals checks that free space is the
// ledger's: Longhorn's own storageScheduled on the node (which Longhorn
// counts without the ledger) neither adds nor removes space.
func TestEvaluateReadsTheLedgerNotLonghornsTotals(t *testing.T) {
	sched := settings.Default()
	node, ledgers := testNode("n", []int64{400 * gi}, []int64{350 * gi})
	node.Status.DiskStatus["disk-1"].StorageScheduled = 0
	if f := evaluateNode(volumes(1, 100*gi), node, ledgers, nil, sched, "default/p", 0); f.OK {
		t.Errorf("the ledger has 50Gi free: 100Gi must not fit whatever Longhorn's node says: %+v", f)
	}
	node, ledgers = testNode("n", []int64{400 * gi}, nil)
	node.Status.DiskStatus["disk-1"].StorageScheduled = 400 * gi
	if f := evaluateNode(volumes(1, 100*gi), node, ledgers, nil, sched, "default/p", 0); !f.OK {
		t.Errorf("the ledger has 400Gi free: 100Gi fits whatever Longhorn's node says: %+v", f)
	}
}

func TestEvaluateSkipsVolumesWithAReplicaOnTheNode(t *testing.T) {
	node, ledgers := testNode("n", []int64{100 * gi}, []int64{100 * gi})
	vols := volumes(1, 100*gi)
	vols[0].ReplicaNodes["n"] = true
	if f := evaluateNode(vols, node, ledgers, nil, settings.Default(), "default/p", 0); !f.OK || len(f.Assignment) != 0 {
		t.Errorf("a volume with a replica on the node needs no space there: %+v", f)
	}
}

func TestEvaluateNodeEligibility(t *testing.T) {
	sched := settings.Default()
	for _, tc := range []struct {
		name   string
		mutate func(*lhv1.Node, map[string]*dsv1.DiskSchedule)
		want   string
	}{
		{"scheduling disabled", func(n *lhv1.Node, _ map[string]*dsv1.DiskSchedule) { n.Spec.AllowScheduling = false }, "scheduling is disabled on the node"},
		{"evicting", func(n *lhv1.Node, _ map[string]*dsv1.DiskSchedule) { n.Spec.EvictionRequested = true }, "eviction is requested on the node"},
		{"not ready", func(n *lhv1.Node, _ map[string]*dsv1.DiskSchedule) {
			n.Status.Conditions[nodeReady] = testenv.LonghornCondition(lhv1.NodeConditionTypeReady, false, lhv1.NodeConditionReasonKubernetesNodeNotReady, "")
		}, "node is not ready"},
		{"cordoned", func(n *lhv1.Node, _ map[string]*dsv1.DiskSchedule) {
			n.Status.Conditions[nodeSchedulable] = testenv.LonghornCondition(lhv1.NodeConditionTypeSchedulable, false, lhv1.NodeConditionReasonKubernetesNodeCordoned, "")
		}, "node is cordoned"},
		{"node selector", func(n *lhv1.Node, _ map[string]*dsv1.DiskSchedule) { n.Spec.Tags = []string{"slow"} }, "do not match selector [fast]"},
		{"disk pressure", func(n *lhv1.Node, _ map[string]*dsv1.DiskSchedule) {
			n.Status.DiskStatus["disk-1"].Conditions[diskSchedulable] = testenv.LonghornCondition(lhv1.DiskConditionTypeSchedulable, false, lhv1.DiskConditionReasonDiskPressure, "")
		}, "no schedulable disk (disk-1: disk is not schedulable)"},
		{"disk not ready", func(n *lhv1.Node, _ map[string]*dsv1.DiskSchedule) {
			n.Status.DiskStatus["disk-1"].Conditions[diskReady] = testenv.LonghornCondition(lhv1.DiskConditionTypeReady, false, lhv1.DiskConditionReasonDiskNotReady, "")
		}, "no schedulable disk (disk-1: disk is not schedulable)"},
		{"disk scheduling disabled", func(n *lhv1.Node, _ map[string]*dsv1.DiskSchedule) {
			spec := n.Spec.Disks["disk-1"]
			spec.AllowScheduling = false
			n.Spec.Disks["disk-1"] = spec
		}, "scheduling is disabled on the disk"},
		{"disk evicting", func(n *lhv1.Node, _ map[string]*dsv1.DiskSchedule) {
			spec := n.Spec.Disks["disk-1"]
			spec.EvictionRequested = true
			n.Spec.Disks["disk-1"] = spec
		}, "eviction is requested on the disk"},
		{"block disk", func(n *lhv1.Node, _ map[string]*dsv1.DiskSchedule) {
			spec := n.Spec.Disks["disk-1"]
			spec.Type = lhv1.DiskTypeBlock
			n.Spec.Disks["disk-1"] = spec
		}, "disk type block"},
		{"disk without UUID", func(n *lhv1.Node, _ map[string]*dsv1.DiskSchedule) { n.Status.DiskStatus["disk-1"].DiskUUID = "" }, "disk has no UUID"},
		{"no ledger", func(_ *lhv1.Node, l map[string]*dsv1.DiskSchedule) { delete(l, "n-uuid-1") }, "no DiskSchedule for disk n-uuid-1"},
		{"ledger not ready", func(_ *lhv1.Node, l map[string]*dsv1.DiskSchedule) {
			l["n-uuid-1"].Status.Conditions[0].Status = metav1.ConditionFalse
			l["n-uuid-1"].Status.Conditions[0].Message = "node is cordoned"
		}, "DiskSchedule is not Ready: node is cordoned"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node, ledgers := testNode("n", []int64{400 * gi}, nil)
			tc.mutate(node, ledgers)
			vols := volumes(1, 10*gi)
			if tc.name == "node selector" {
				vols[0].NodeSelector = []string{"fast"}
			}
			if f := evaluateNode(vols, node, ledgers, nil, sched, "default/p", 0); f.OK || !strings.Contains(f.Reason, tc.want) {
				t.Errorf("want no fit because %q, got %+v", tc.want, f)
			}
		})
	}
	t.Run("not a Longhorn node", func(t *testing.T) {
		if f := evaluateNode(volumes(1, gi), nil, nil, nil, sched, "default/p", 0); f.OK || f.Reason != "not a Longhorn node" {
			t.Errorf("no Longhorn node: want no fit, got %+v", f)
		}
	})
}

// TestEvaluateUsesOnlyEligibleDisks checks that an ineligible disk's space
// is not offered: the volume goes to the one eligible disk or nowhere.
func TestEvaluateUsesOnlyEligibleDisks(t *testing.T) {
	node, ledgers := testNode("n", []int64{400 * gi, 50 * gi}, nil)
	node.Status.DiskStatus["disk-1"].Conditions[diskSchedulable] = testenv.LonghornCondition(lhv1.DiskConditionTypeSchedulable, false, lhv1.DiskConditionReasonDiskPressure, "")
	sched := settings.Default()
	if f := evaluateNode(volumes(1, 40*gi), node, ledgers, nil, sched, "default/p", 0); !f.OK || f.Assignment["pvc-0"] != "n-uuid-2" || f.Free != 10*gi {
		t.Errorf("40Gi fits only on disk-2, leaving 10Gi: %+v", f)
	}
	if f := evaluateNode(volumes(1, 100*gi), node, ledgers, nil, sched, "default/p", 0); f.OK || !strings.Contains(f.Reason, "50Gi") {
		t.Errorf("100Gi fits on no eligible disk, the reason should give disk-2's 50Gi: %+v", f)
	}
}

// TestEvaluateDataEngine: a v2 volume's replica needs a block disk, so a
// node whose disks are all filesystem disks cannot take it, whatever its
// space, and says so; a v1 volume fits there.
func TestEvaluateDataEngine(t *testing.T) {
	node, ledgers := testNode("n", []int64{400 * gi}, nil)
	sched := settings.Default()
	v2 := volumes(1, 10*gi)
	v2[0].DataEngine = lhv1.DataEngineTypeV2
	if f := evaluateNode(v2, node, ledgers, nil, sched, "default/p", 0); f.OK || !strings.Contains(f.Reason, "disk type filesystem does not match the volume's block") {
		t.Errorf("a v2 volume on a node with only a filesystem disk: %+v, want refused for the disk type", f)
	}
	if f := evaluateNode(volumes(1, 10*gi), node, ledgers, nil, sched, "default/p", 0); !f.OK {
		t.Errorf("a v1 volume of 10Gi on a 400Gi filesystem disk: %+v, want it to fit", f)
	}
}

func TestEvaluateEmptyDiskSelectorSetting(t *testing.T) {
	node, ledgers := testNode("n", []int64{100 * gi}, nil)
	spec := node.Spec.Disks["disk-1"]
	spec.Tags = []string{"ssd"}
	node.Spec.Disks["disk-1"] = spec
	vols := volumes(1, 10*gi)
	sched := settings.Default()
	if f := evaluateNode(vols, node, ledgers, nil, sched, "default/p", 0); !f.OK {
		t.Errorf("allow-empty-disk-selector-volume=true: a tagged disk takes a selector-less volume: %+v", f)
	}
	sched.AllowEmptyDiskSelectorVolume = false
	if f := evaluateNode(vols, node, ledgers, nil, sched, "default/p", 0); f.OK || !strings.Contains(f.Reason, settings.AllowEmptyDiskSelectorVolume) {
		t.Errorf("allow-empty-disk-selector-volume=false: a tagged disk must not take a selector-less volume: %+v", f)
	}
}

// TestEvaluateDiskSelectorPerVolume checks that each volume uses only the
// disks its own selector allows, packed together.
func TestEvaluateDiskSelectorPerVolume(t *testing.T) {
	node, ledgers := testNode("n", []int64{100 * gi, 100 * gi}, nil)
	spec := node.Spec.Disks["disk-2"]
	spec.Tags = []string{"ssd"}
	node.Spec.Disks["disk-2"] = spec
	vols := volumes(2, 60*gi)
	vols[0].DiskSelector = []string{"ssd"}
	f := evaluateNode(vols, node, ledgers, nil, settings.Default(), "default/p", 0)
	if !f.OK || f.Assignment["pvc-0"] != "n-uuid-2" || f.Assignment["pvc-1"] != "n-uuid-1" {
		t.Errorf("pvc-0 must go to the ssd disk and pvc-1 to the other: %+v", f)
	}
	vols[1].DiskSelector = []string{"ssd"}
	if f := evaluateNode(vols, node, ledgers, nil, settings.Default(), "default/p", 0); f.OK {
		t.Errorf("two 60Gi ssd volumes do not fit the one 100Gi ssd disk: %+v", f)
	}
	vols[1].DiskSelector = []string{"nvme"}
	if f := evaluateNode(vols, node, ledgers, nil, settings.Default(), "default/p", 0); f.OK || !strings.Contains(f.Reason, "volume pvc-1: no schedulable disk") {
		t.Errorf("no disk has tag nvme: %+v", f)
	}
}

func TestRestartNode(t *testing.T) {
	vols := volumes(2, gi)
	for i := range vols {
		vols[i].HealthyNodes = map[string]bool{}
	}
	vols[0].HealthyNodes["b"], vols[1].HealthyNodes["b"] = true, true
	vols[0].HealthyNodes["a"] = true
	if got := restartNode(vols, []string{"c", "a", "b"}); got != "b" {
		t.Errorf("restartNode = %q, want b (the only node with a replica of every volume)", got)
	}
	if got := restartNode(vols, []string{"a", "c"}); got != "" {
		t.Errorf("restartNode = %q, want none", got)
	}
	// A replica that is failed or being evicted is not healthy: the node
	// holding it keeps no pod (HealthyNodes leaves it out), whatever
	// ReplicaNodes says.
	vols[1].ReplicaNodes["a"] = true
	if got := restartNode(vols, []string{"a", "c"}); got != "" {
		t.Errorf("restartNode = %q, want none: node a's replica of volume 1 is not healthy", got)
	}
}

// evaluateNode decides whether the volumes that have no replica on node fit
// together on its disks. node is Longhorn's node (nil when there is none);
// ledgers are its DiskSchedules by disk UUID; pod ("namespace/name") gets
// back the space its own reservations hold: evaluateReading on the node
// read with its ledgers.
func evaluateNode(vols []podVolume, node *lhv1.Node, ledgers map[string]*dsv1.DiskSchedule,
	claimed func(uuid string) int64, sched settings.Scheduling, pod string, budget int) fit {
	if node == nil {
		return fit{Reason: "not a Longhorn node"}
	}
	return evaluateReading(vols, readNode(node, ledgers), claimed, sched, pod, budget)
}

// TestEvaluateAnswersAsEachNodeAlone: a filter over many nodes keeps the
// packing of several volumes for the nodes that look alike to them; its
// verdicts are each node's verdict evaluated alone, on random clusters
// where many nodes have the same disks, as free, and some differ only in
// a disk's tags or name.
func TestEvaluateAnswersAsEachNodeAlone(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	sched := settings.Default()
	pick := func(from ...int64) int64 { return from[rng.IntN(len(from))] }
	for round := range 50 {
		f := newFlight(clocktesting.NewFakeClock(time.Now()), metrics.NewExtender(prometheus.NewRegistry()))
		var names []string
		for i := range 40 {
			name := fmt.Sprintf("node-%02d", i)
			sizes := make([]int64, 1+rng.IntN(4))
			used := make([]int64, len(sizes))
			for d := range sizes {
				sizes[d] = pick(100*gi, 200*gi)
				used[d] = pick(0, 0, 50*gi)
			}
			n, ledgers := testNode(name, sizes, used)
			for disk, spec := range n.Spec.Disks {
				if rng.IntN(4) == 0 {
					spec.Tags = []string{"ssd"}
					n.Spec.Disks[disk] = spec
				}
			}
			f.nodeEvent(n, false)
			for _, ds := range ledgers {
				f.ledgerEvent(ds, false, nil)
			}
			names = append(names, name)
		}
		vols := volumes(2+rng.IntN(3), 0)
		for i := range vols {
			vols[i].Size = pick(40*gi, 60*gi, 100*gi)
			vols[i].kind = kind{DataLocality: lhv1.DataLocalityBestEffort, NumberOfReplicas: 1}
			if rng.IntN(3) == 0 {
				vols[i].DiskSelector = []string{"ssd"}
			}
		}
		s := f.snapshot("")
		got := evaluate(s, question{pod: "default/p", vols: vols, candidates: names, sched: sched, how: withOverlay, budget: packing.DefaultBudget})
		for _, name := range names {
			want := evaluateReading(vols, s.view.reading(name), nil, sched, "default/p", packing.DefaultBudget)
			if g := got[name]; g.OK != want.OK || g.Reason != want.Reason || !maps.Equal(g.Assignment, want.Assignment) ||
				g.Free != want.Free || g.Steps != want.Steps || g.Exact != want.Exact {
				t.Fatalf("round %d, %s: the filter's verdict %+v, the node's alone %+v", round, name, g, want)
			}
		}
	}
}
