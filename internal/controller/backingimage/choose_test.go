package backingimage

import (
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhornv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/settings"
)

const gi = int64(1) << 30

func condition(typ string, ok bool) metav1.Condition {
	c := metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: "Test"}
	if !ok {
		c.Status = metav1.ConditionFalse
	}
	return c
}

// testNode returns a Ready, schedulable node whose disks (name → UUID) are
// schedulable and untagged.
func testNode(name string, disks map[string]string, edits ...func(*longhornv1.Node)) longhornv1.Node {
	n := longhornv1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       longhornv1.NodeSpec{AllowScheduling: true, Disks: map[string]longhornv1.DiskSpec{}},
		Status: longhornv1.NodeStatus{
			Conditions: []metav1.Condition{condition(longhornv1.NodeConditionReady, true), condition(longhornv1.NodeConditionSchedulable, true)},
			DiskStatus: map[string]*longhornv1.DiskStatus{},
		},
	}
	for disk, uuid := range disks {
		n.Spec.Disks[disk] = longhornv1.DiskSpec{Path: "/" + disk, AllowScheduling: true}
		n.Status.DiskStatus[disk] = &longhornv1.DiskStatus{DiskUUID: uuid,
			Conditions: []metav1.Condition{condition(longhornv1.DiskConditionSchedulable, true)}}
	}
	for _, e := range edits {
		e(&n)
	}
	return n
}

// testLedger returns a decided ledger of node with the given limit and
// granted backing images (name → bytes).
func testLedger(uuid, node string, limit int64, granted map[string]int64) *longhornv1.DiskSchedule {
	ds := &longhornv1.DiskSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: uuid},
		Spec:       longhornv1.DiskScheduleSpec{Name: "disk", NodeID: node},
		Status:     longhornv1.DiskScheduleStatus{StorageLimit: limit},
	}
	for name, size := range granted {
		if ds.Spec.BackingImages == nil {
			ds.Spec.BackingImages = map[string]longhornv1.RequestedBytes{}
			ds.Status.BackingImages = map[string]longhornv1.RequestStatus{}
		}
		ds.Spec.BackingImages[name] = longhornv1.RequestedBytes(size)
		ds.Status.BackingImages[name] = longhornv1.RequestStatus{State: longhornv1.RequestStateScheduled, RequestedSize: size, ScheduledSize: size}
		ds.Status.StorageScheduled += size
	}
	return ds
}

func ledgers(list ...*longhornv1.DiskSchedule) map[string]*longhornv1.DiskSchedule {
	out := map[string]*longhornv1.DiskSchedule{}
	for _, ds := range list {
		out[ds.Name] = ds
	}
	return out
}

func chosenUUIDs(sel selection) []string {
	var out []string
	for _, c := range sel.Chosen {
		out = append(out, c.UUID)
	}
	return out
}

func TestChoose(t *testing.T) {
	twoNodes := []longhornv1.Node{
		testNode("n1", map[string]string{"d1": "u1", "d2": "u2"}),
		testNode("n2", map[string]string{"d3": "u3"}),
	}
	cases := []struct {
		name string
		in   choiceInput
		n    int
		// want are the chosen UUIDs, in order.
		want []string
		// refused are substrings the refusals must contain, in order.
		refused []string
		holding int
	}{{
		name: "most free first, ties by UUID",
		in: choiceInput{Nodes: twoNodes, Ledgers: ledgers(
			testLedger("u1", "n1", 10*gi, map[string]int64{"other": 2 * gi}),
			testLedger("u2", "n1", 10*gi, nil),
			testLedger("u3", "n2", 10*gi, nil),
		)},
		n: 3, want: []string{"u2", "u3", "u1"},
	}, {
		name: "at most n",
		in: choiceInput{Nodes: twoNodes, Ledgers: ledgers(
			testLedger("u1", "n1", 10*gi, nil), testLedger("u2", "n1", 20*gi, nil), testLedger("u3", "n2", 30*gi, nil),
		)},
		n: 2, want: []string{"u3", "u2"},
	}, {
		name: "disks holding a copy are skipped",
		in: choiceInput{Nodes: twoNodes, Holding: map[string]bool{"u2": true, "u3": true}, Ledgers: ledgers(
			testLedger("u1", "n1", 10*gi, nil), testLedger("u2", "n1", 20*gi, nil), testLedger("u3", "n2", 30*gi, nil),
		)},
		n: 3, want: []string{"u1"}, holding: 2,
	}, {
		name: "free space counts pending requests of others",
		in: choiceInput{Image: "img", Size: 4 * gi, Nodes: twoNodes, Ledgers: ledgers(
			func() *longhornv1.DiskSchedule {
				ds := testLedger("u1", "n1", 10*gi, map[string]int64{"a": 4 * gi})
				ds.Spec.BackingImages["b"] = longhornv1.RequestedBytes(4 * gi) // pending
				return ds
			}(),
			testLedger("u2", "n1", 10*gi, map[string]int64{"a": 4 * gi}),
			testLedger("u3", "n2", 4*gi, nil),
		)},
		n: 3, want: []string{"u2", "u3"},
		refused: []string{"n1/d1 (u1): 2Gi free of limit 10Gi, needs 4Gi"},
	}, {
		name: "a ledger that still shows an earlier request or decision of the image is skipped",
		in: choiceInput{Image: "img", Size: gi, Nodes: twoNodes, Ledgers: ledgers(
			testLedger("u1", "n1", 10*gi, map[string]int64{"img": gi}),
			func() *longhornv1.DiskSchedule {
				ds := testLedger("u2", "n1", 10*gi, nil)
				ds.Status.BackingImages = map[string]longhornv1.RequestStatus{"img": {State: longhornv1.RequestStateRejected, RequestedSize: gi}}
				return ds
			}(),
			testLedger("u3", "n2", 10*gi, nil),
		)},
		n: 3, want: []string{"u3"},
		refused: []string{"n1/d1 (u1): its ledger still holds an earlier decision", "n1/d2 (u2): its ledger still holds an earlier decision"},
	}, {
		name: "node conditions and flags",
		in: choiceInput{Size: gi, Nodes: []longhornv1.Node{
			testNode("a", map[string]string{"d": "ua"}, func(n *longhornv1.Node) {
				n.Status.Conditions[0] = condition(longhornv1.NodeConditionReady, false)
			}),
			testNode("b", map[string]string{"d": "ub"}, func(n *longhornv1.Node) {
				n.Status.Conditions[1] = condition(longhornv1.NodeConditionSchedulable, false)
			}),
			testNode("c", map[string]string{"d": "uc"}, func(n *longhornv1.Node) { n.Spec.AllowScheduling = false }),
			testNode("d", map[string]string{"d": "ud"}, func(n *longhornv1.Node) { n.Spec.EvictionRequested = true }),
			testNode("e", map[string]string{"d": "ue"}),
		}, Ledgers: ledgers(testLedger("ua", "a", 10*gi, nil), testLedger("ub", "b", 10*gi, nil),
			testLedger("uc", "c", 10*gi, nil), testLedger("ud", "d", 10*gi, nil), testLedger("ue", "e", 10*gi, nil))},
		n: 5, want: []string{"ue"},
		refused: []string{"node a: not ready", "node b: not schedulable", "node c: scheduling is disabled", "node d: eviction is requested"},
	}, {
		name: "disk flags, condition and ledger",
		in: choiceInput{Size: gi, Nodes: []longhornv1.Node{
			testNode("n", map[string]string{"d1": "u1", "d2": "u2", "d3": "u3", "d4": "u4", "d5": "u5", "d6": "u6"}, func(n *longhornv1.Node) {
				d1 := n.Spec.Disks["d1"]
				d1.AllowScheduling = false
				n.Spec.Disks["d1"] = d1
				d2 := n.Spec.Disks["d2"]
				d2.EvictionRequested = true
				n.Spec.Disks["d2"] = d2
				n.Status.DiskStatus["d3"].Conditions[0] = condition(longhornv1.DiskConditionSchedulable, false)
				n.Status.DiskStatus["d6"].DiskUUID = ""
			}),
		}, Ledgers: ledgers(testLedger("u1", "n", 10*gi, nil), testLedger("u2", "n", 10*gi, nil),
			testLedger("u3", "n", 10*gi, nil), testLedger("u5", "other-node", 10*gi, nil))},
		n: 5, want: nil,
		refused: []string{"n/d1 (u1): scheduling is disabled", "n/d2 (u2): eviction is requested", "n/d3 (u3): not schedulable",
			"n/d4 (u4): no DiskSchedule", "n/d5 (u5): no DiskSchedule", "n/d6: no disk UUID yet"},
	}, {
		name: "selectors",
		in: choiceInput{Size: gi, NodeSelector: []string{"fast"}, DiskSelector: []string{"ssd", "nvme"}, Nodes: []longhornv1.Node{
			testNode("a", map[string]string{"d": "ua"}),
			testNode("b", map[string]string{"d1": "ub1", "d2": "ub2"}, func(n *longhornv1.Node) {
				n.Spec.Tags = []string{"fast", "big"}
				d1 := n.Spec.Disks["d1"]
				d1.Tags = []string{"ssd"}
				n.Spec.Disks["d1"] = d1
				d2 := n.Spec.Disks["d2"]
				d2.Tags = []string{"nvme", "ssd", "x"}
				n.Spec.Disks["d2"] = d2
			}),
		}, Ledgers: ledgers(testLedger("ua", "a", 10*gi, nil), testLedger("ub1", "b", 10*gi, nil), testLedger("ub2", "b", 10*gi, nil))},
		n: 2, want: []string{"ub2"},
		refused: []string{"node a: tags [] do not match selector [fast]", "b/d1 (ub1): tags [ssd] do not match selector [nvme ssd]"},
	}, {
		name: "empty selectors and allow-empty settings off: only untagged nodes and disks",
		in: choiceInput{Size: gi, Settings: settings.Scheduling{}, Nodes: []longhornv1.Node{
			testNode("a", map[string]string{"d": "ua"}, func(n *longhornv1.Node) { n.Spec.Tags = []string{"t"} }),
			testNode("b", map[string]string{"d1": "ub1", "d2": "ub2"}, func(n *longhornv1.Node) {
				d1 := n.Spec.Disks["d1"]
				d1.Tags = []string{"ssd"}
				n.Spec.Disks["d1"] = d1
			}),
		}, Ledgers: ledgers(testLedger("ua", "a", 10*gi, nil), testLedger("ub1", "b", 10*gi, nil), testLedger("ub2", "b", 10*gi, nil))},
		n: 3, want: []string{"ub2"},
		refused: []string{"node a: tags [t] do not match the empty selector (allow-empty-node-selector-volume is false)",
			"b/d1 (ub1): tags [ssd] do not match the empty selector (allow-empty-disk-selector-volume is false)"},
	}, {
		name: "empty selectors and allow-empty settings on: tagged nodes and disks too",
		in: choiceInput{Size: gi, Settings: settings.Default(), Nodes: []longhornv1.Node{
			testNode("a", map[string]string{"d": "ua"}, func(n *longhornv1.Node) {
				n.Spec.Tags = []string{"t"}
				d := n.Spec.Disks["d"]
				d.Tags = []string{"ssd"}
				n.Spec.Disks["d"] = d
			}),
		}, Ledgers: ledgers(testLedger("ua", "a", 10*gi, nil))},
		n: 1, want: []string{"ua"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sel := choose(tc.in, tc.n)
			if got := chosenUUIDs(sel); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("chose %v, want %v", got, tc.want)
			}
			if len(sel.Refused) != len(tc.refused) {
				t.Fatalf("refusals %v, want %d of them", sel.Refused, len(tc.refused))
			}
			for i, want := range tc.refused {
				if got := sel.Refused[i].String(); !strings.Contains(got, want) {
					t.Errorf("refusal %d is %q, want it to contain %q", i, got, want)
				}
			}
			if sel.Holding != tc.holding {
				t.Errorf("holding %d, want %d", sel.Holding, tc.holding)
			}
			// Determinism: the same input gives the same choice.
			if again := choose(tc.in, tc.n); !reflect.DeepEqual(again, sel) {
				t.Errorf("a second choice differs: %+v, then %+v", sel, again)
			}
		})
	}
}

func TestDecisionOf(t *testing.T) {
	ledger := func(spec int64, st *longhornv1.RequestStatus) *longhornv1.DiskSchedule {
		ds := &longhornv1.DiskSchedule{}
		if spec > 0 {
			ds.Spec.BackingImages = map[string]longhornv1.RequestedBytes{"img": longhornv1.RequestedBytes(spec)}
		}
		if st != nil {
			ds.Status.BackingImages = map[string]longhornv1.RequestStatus{"img": *st}
		}
		return ds
	}
	cases := []struct {
		name    string
		ds      *longhornv1.DiskSchedule
		want    decision
		wantMsg string
	}{
		{"no request", ledger(0, nil), decisionUnrequested, ""},
		{"a request of another size", ledger(2*gi, nil), decisionUnrequested, ""},
		{"undecided", ledger(4*gi, nil), decisionPending, ""},
		{"decided at another size", ledger(4*gi, &longhornv1.RequestStatus{State: longhornv1.RequestStateScheduled, RequestedSize: 2 * gi, ScheduledSize: 2 * gi}), decisionPending, ""},
		{"granted", ledger(4*gi, &longhornv1.RequestStatus{State: longhornv1.RequestStateScheduled, RequestedSize: 4 * gi, ScheduledSize: 4 * gi}), decisionGranted, ""},
		{"rejected", ledger(4*gi, &longhornv1.RequestStatus{State: longhornv1.RequestStateRejected, RequestedSize: 4 * gi, Message: "requested 4Gi, 2Gi free of limit 10Gi"}),
			decisionRejected, "requested 4Gi, 2Gi free of limit 10Gi"},
		{"a rejected growth keeps the old size", ledger(4*gi, &longhornv1.RequestStatus{State: longhornv1.RequestStateRejected, RequestedSize: 4 * gi, ScheduledSize: 2 * gi, Message: "no"}),
			decisionRejected, "no"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, msg := decisionOf(tc.ds, "img", 4*gi)
			if got != tc.want || msg != tc.wantMsg {
				t.Errorf("decisionOf = %v, %q; want %v, %q", got, msg, tc.want, tc.wantMsg)
			}
		})
	}
}

func TestInsufficientMessageBounded(t *testing.T) {
	var sel selection
	for range 3 * maxListed {
		sel.Refused = append(sel.Refused, refusal{Where: "node x", Why: "not ready"})
	}
	msg := insufficientMessage(2, 0, 0, gi, sel)
	if n := strings.Count(msg, "node x"); n != maxListed {
		t.Errorf("message names %d refusals, want %d: %s", n, maxListed, msg)
	}
	if !strings.HasSuffix(msg, "; and 32 more") {
		t.Errorf("message %q does not end with the count of the others", msg)
	}
}
