package extender

import (
	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

// view is what the filter reads of the cluster's disks: Longhorn's Nodes
// and the DiskSchedules by node, kept from informer events so a filter
// reads maps instead of listing every Node and ledger. The objects are the
// informer's own and are never modified. Like the overlay it is guarded by
// the Extender's lock, so a ledger change and the overlay entries it
// settles are seen together.
type view struct {
	nodes map[string]*lhv1.Node
	// ledgers are the DiskSchedules by node, then by disk UUID.
	ledgers map[string]map[string]*dsv1.DiskSchedule
	// nodeOf maps each ledger's disk UUID to its node.
	nodeOf map[string]string
}

func newView() *view {
	return &view{nodes: map[string]*lhv1.Node{}, ledgers: map[string]map[string]*dsv1.DiskSchedule{}, nodeOf: map[string]string{}}
}

// setNode records Longhorn's node n.
func (v *view) setNode(n *lhv1.Node) { v.nodes[n.Name] = n }

// deleteNode forgets Longhorn's node name.
func (v *view) deleteNode(name string) { delete(v.nodes, name) }

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
}

// ledger returns the ledger of disk uuid, or nil.
func (v *view) ledger(uuid string) *dsv1.DiskSchedule {
	return v.ledgers[v.nodeOf[uuid]][uuid]
}
