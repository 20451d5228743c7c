package extender

import (
	"fmt"
	"maps"
	"sort"
	"sync"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"k8s.io/apimachinery/pkg/api/meta"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/placement"
)

// view is what the filter reads of the cluster's disks: Longhorn's Nodes
// and the DiskSchedules by node, kept from informer events so a filter
// reads maps instead of listing every Node and ledger. The objects are the
// informer's own and are never modified.
//
// The in-flight state (flight) keeps the current view under its lock, with
// the overlay, so that a ledger change and the overlay entries it settles
// are seen together. A view it has handed to an evaluation (flight.snapshot)
// is never changed again: the next event edits a copy (copy on write), so
// evaluations read it without a lock. A node's readings are made from its
// nodeView, which no event changes either (an event replaces it), once, by
// whichever evaluation first needs them.
type view struct {
	// nodes are Longhorn's nodes with their ledgers, by node name; a node
	// whose ledgers are seen before Longhorn's node has no node yet.
	nodes map[string]*nodeView
	// nodeOf maps each ledger's disk UUID to its node.
	nodeOf map[string]string
	// cluster is every Longhorn node as placement sees it, made once per
	// view that an evaluation reads.
	cluster *clusterMemo
}

// nodeView is one node of a view: Longhorn's node and its ledgers, never
// changed once in a view, and its reading, made once when first read.
type nodeView struct {
	// node is Longhorn's node, or nil when only its ledgers are known.
	node *lhv1.Node
	// ledgers are its DiskSchedules by disk UUID.
	ledgers map[string]*dsv1.DiskSchedule

	once sync.Once
	read *nodeReading
}

// clusterMemo is a view's placementNodes, made once.
type clusterMemo struct {
	once  sync.Once
	nodes []placement.Node
}

func newView() *view {
	return &view{nodes: map[string]*nodeView{}, nodeOf: map[string]string{}, cluster: &clusterMemo{}}
}

// clone returns a copy of v that events may edit: it shares v's nodeViews,
// which no edit changes.
func (v *view) clone() *view {
	return &view{nodes: maps.Clone(v.nodes), nodeOf: maps.Clone(v.nodeOf), cluster: &clusterMemo{}}
}

// edited forgets what was made from v before an edit. Only a view no
// evaluation holds is edited.
func (v *view) edited() { v.cluster = &clusterMemo{} }

// setNode records Longhorn's node n.
func (v *view) setNode(n *lhv1.Node) {
	var ledgers map[string]*dsv1.DiskSchedule
	if old := v.nodes[n.Name]; old != nil {
		ledgers = old.ledgers
	}
	v.nodes[n.Name] = &nodeView{node: n, ledgers: ledgers}
	v.edited()
}

// deleteNode forgets Longhorn's node name; its ledgers stay.
func (v *view) deleteNode(name string) {
	old := v.nodes[name]
	if old == nil {
		return
	}
	if len(old.ledgers) == 0 {
		delete(v.nodes, name)
	} else {
		v.nodes[name] = &nodeView{ledgers: old.ledgers}
	}
	v.edited()
}

// setLedger records ds under its node.
func (v *view) setLedger(ds *dsv1.DiskSchedule) {
	if old, ok := v.nodeOf[ds.Name]; ok && old != ds.Spec.NodeID {
		v.deleteLedger(ds.Name)
	}
	cur := v.nodes[ds.Spec.NodeID]
	next := &nodeView{}
	if cur != nil {
		next.node = cur.node
		next.ledgers = maps.Clone(cur.ledgers)
	}
	if next.ledgers == nil {
		next.ledgers = map[string]*dsv1.DiskSchedule{}
	}
	next.ledgers[ds.Name] = ds
	v.nodes[ds.Spec.NodeID] = next
	v.nodeOf[ds.Name] = ds.Spec.NodeID
	v.edited()
}

// deleteLedger forgets the ledger of disk uuid.
func (v *view) deleteLedger(uuid string) {
	name, ok := v.nodeOf[uuid]
	if !ok {
		return
	}
	delete(v.nodeOf, uuid)
	if cur := v.nodes[name]; cur != nil {
		ledgers := maps.Clone(cur.ledgers)
		delete(ledgers, uuid)
		if cur.node == nil && len(ledgers) == 0 {
			delete(v.nodes, name)
		} else {
			v.nodes[name] = &nodeView{node: cur.node, ledgers: ledgers}
		}
	}
	v.edited()
}

// ledger returns the ledger of disk uuid, or nil.
func (v *view) ledger(uuid string) *dsv1.DiskSchedule {
	if n := v.nodes[v.nodeOf[uuid]]; n != nil {
		return n.ledgers[uuid]
	}
	return nil
}

// ledgersOf returns the ledgers of node name by disk UUID, nil when it has
// none; no event changes the map returned.
func (v *view) ledgersOf(name string) map[string]*dsv1.DiskSchedule {
	if n := v.nodes[name]; n != nil {
		return n.ledgers
	}
	return nil
}

// reading returns node name's reading, made once per change of its
// Longhorn node or ledgers; nil when Longhorn has no such node. It is safe
// for concurrent use on a view no event edits any more.
func (v *view) reading(name string) *nodeReading {
	n := v.nodes[name]
	if n == nil || n.node == nil {
		return nil
	}
	n.once.Do(func() { n.read = readNode(n.node, n.ledgers) })
	return n.read
}

// placementNodes returns every Longhorn node as placement sees it, with its
// disks' space as their ledgers count it, sorted by name. It is made once
// per view, and is safe for concurrent use on a view no event edits any
// more.
func (v *view) placementNodes() []placement.Node {
	m := v.cluster
	m.once.Do(func() {
		names := make([]string, 0, len(v.nodes))
		for name, n := range v.nodes {
			if n.node != nil {
				names = append(names, name)
			}
		}
		sort.Strings(names)
		m.nodes = make([]placement.Node, 0, len(names))
		for _, name := range names {
			m.nodes = append(m.nodes, v.reading(name).placement)
		}
	})
	return m.nodes
}

// nodeReading is what the filter needs of one node whatever the pod: the
// node as placement sees it, with each disk's space as its ledger counts
// it, and each disk's ledger.
type nodeReading struct {
	node *lhv1.Node
	// placement is the node as package placement sees it.
	placement placement.Node
	// disks are its disks sorted by name.
	disks []diskReading
}

// diskReading is one disk of a nodeReading.
type diskReading struct {
	placement.Disk
	// ledger is the disk's DiskSchedule, or nil.
	ledger *dsv1.DiskSchedule
	// ledgerFailure says why the disk's ledger grants nothing now, or "".
	ledgerFailure string
	// room is what the ledger can grant to each pod (ledger.RoomOf).
	room ledger.Room
}

// readNode reads Longhorn's node n with its ledgers (by disk UUID).
func readNode(n *lhv1.Node, ledgers map[string]*dsv1.DiskSchedule) *nodeReading {
	out := &nodeReading{node: n, placement: placement.FromLonghorn(n, ledgerSpace(ledgers))}
	for _, d := range out.placement.Disks {
		dr := diskReading{Disk: d}
		var uuid string
		if st := n.Status.DiskStatus[d.Name]; st != nil {
			uuid = st.DiskUUID
		}
		ds := ledgers[uuid]
		switch {
		case uuid == "":
			// placement.DiskFailures names it.
		case ds == nil:
			dr.ledgerFailure = fmt.Sprintf("no DiskSchedule for disk %s yet", uuid)
		case !meta.IsStatusConditionTrue(ds.Status.Conditions, dsv1.DiskScheduleConditionReady):
			dr.ledgerFailure = "DiskSchedule is not Ready"
			if c := meta.FindStatusCondition(ds.Status.Conditions, dsv1.DiskScheduleConditionReady); c != nil && c.Message != "" {
				dr.ledgerFailure += ": " + c.Message
			}
		default:
			dr.ledger = ds
			dr.room = ledger.RoomOf(ds)
		}
		out.disks = append(out.disks, dr)
	}
	sort.Slice(out.disks, func(i, j int) bool { return out.disks[i].Name < out.disks[j].Name })
	return out
}

// ledgerSpace gives placement each disk's space as its ledger counts it:
// the limit, and what is scheduled plus what is pending. A disk without a
// ledger has no known space.
func ledgerSpace(ledgers map[string]*dsv1.DiskSchedule) placement.SpaceFunc {
	return func(uuid string) (placement.Space, bool) {
		ds := ledgers[uuid]
		if ds == nil {
			return placement.Space{}, false
		}
		return placement.Space{Limit: ds.Status.StorageLimit, Scheduled: ledger.AddSat(ds.Status.StorageScheduled, ledger.PendingGrowth(ds))}, true
	}
}
