package extender

import (
	"fmt"
	"sort"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"k8s.io/apimachinery/pkg/api/meta"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/placement"
)

// view is what the filter reads of the cluster's disks: Longhorn's Nodes
// and the DiskSchedules by node, kept from informer events so a filter
// reads maps instead of listing every Node and ledger. The objects are the
// informer's own and are never modified. Like the overlay it is guarded by
// the in-flight state's lock (flight), so a ledger change and the overlay
// entries it settles are seen together.
type view struct {
	nodes map[string]*lhv1.Node
	// ledgers are the DiskSchedules by node, then by disk UUID.
	ledgers map[string]map[string]*dsv1.DiskSchedule
	// nodeOf maps each ledger's disk UUID to its node.
	nodeOf map[string]string
	// read caches each node's reading (readNode) until its Longhorn node or
	// one of its ledgers changes.
	read map[string]*nodeReading
}

func newView() *view {
	return &view{nodes: map[string]*lhv1.Node{}, ledgers: map[string]map[string]*dsv1.DiskSchedule{},
		nodeOf: map[string]string{}, read: map[string]*nodeReading{}}
}

// setNode records Longhorn's node n.
func (v *view) setNode(n *lhv1.Node) {
	v.nodes[n.Name] = n
	delete(v.read, n.Name)
}

// deleteNode forgets Longhorn's node name.
func (v *view) deleteNode(name string) {
	delete(v.nodes, name)
	delete(v.read, name)
}

// setLedger records ds under its node.
func (v *view) setLedger(ds *dsv1.DiskSchedule) {
	if old, ok := v.nodeOf[ds.Name]; ok && old != ds.Spec.NodeID {
		v.deleteLedger(ds.Name)
	}
	byDisk := v.ledgers[ds.Spec.NodeID]
	if byDisk == nil {
		byDisk = map[string]*dsv1.DiskSchedule{}
		v.ledgers[ds.Spec.NodeID] = byDisk
	}
	byDisk[ds.Name] = ds
	v.nodeOf[ds.Name] = ds.Spec.NodeID
	delete(v.read, ds.Spec.NodeID)
}

// deleteLedger forgets the ledger of disk uuid.
func (v *view) deleteLedger(uuid string) {
	node, ok := v.nodeOf[uuid]
	if !ok {
		return
	}
	delete(v.ledgers[node], uuid)
	if len(v.ledgers[node]) == 0 {
		delete(v.ledgers, node)
	}
	delete(v.nodeOf, uuid)
	delete(v.read, node)
}

// ledger returns the ledger of disk uuid, or nil.
func (v *view) ledger(uuid string) *dsv1.DiskSchedule {
	return v.ledgers[v.nodeOf[uuid]][uuid]
}

// reading returns node name's reading, computed once per change of its
// Longhorn node or ledgers; nil when Longhorn has no such node.
func (v *view) reading(name string) *nodeReading {
	if r, ok := v.read[name]; ok {
		return r
	}
	n := v.nodes[name]
	if n == nil {
		return nil
	}
	r := readNode(n, v.ledgers[name])
	v.read[name] = r
	return r
}

// placementNodes returns every Longhorn node as placement sees it, with its
// disks' space as their ledgers count it, sorted by name.
func (v *view) placementNodes() []placement.Node {
	names := make([]string, 0, len(v.nodes))
	for name := range v.nodes {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]placement.Node, 0, len(names))
	for _, name := range names {
		out = append(out, v.reading(name).placement)
	}
	return out
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
		return placement.Space{Limit: ds.Status.StorageLimit, Scheduled: ds.Status.StorageScheduled + ledger.PendingGrowth(ds)}, true
	}
}
