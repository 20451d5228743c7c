package volume

import (
	"k8s.io/apimachinery/pkg/api/meta"

	longhornv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/placement"
)

// placementNodes turns Nodes and their ledgers into the placement policy's
// view. A disk counts as scheduled what its ledger granted plus what is
// pending in it, less the reservation held for volume, which the volume's
// replica takes over (handoff). Disks without a ledger are left out.
func placementNodes(nodes []longhornv1.Node, ledgers map[string]*longhornv1.DiskSchedule, volume string) []placement.Node {
	out := make([]placement.Node, 0, len(nodes))
	for i := range nodes {
		n := &nodes[i]
		pn := placement.Node{
			Name:              n.Name,
			Zone:              n.Status.Zone,
			Ready:             meta.IsStatusConditionTrue(n.Status.Conditions, longhornv1.NodeConditionReady),
			Schedulable:       meta.IsStatusConditionTrue(n.Status.Conditions, longhornv1.NodeConditionSchedulable),
			AllowScheduling:   n.Spec.AllowScheduling,
			EvictionRequested: n.Spec.EvictionRequested,
			Tags:              n.Spec.Tags,
		}
		for name, spec := range n.Spec.Disks {
			status := n.Status.DiskStatus[name]
			if status == nil || status.DiskUUID == "" {
				continue
			}
			ds := ledgers[status.DiskUUID]
			if ds == nil || ds.Spec.NodeID != n.Name {
				continue
			}
			scheduled := ds.Status.StorageScheduled + ledger.PendingGrowth(ds) - heldFor(ds, volume)
			pn.Disks = append(pn.Disks, placement.Disk{
				Name:              name,
				UUID:              status.DiskUUID,
				Path:              spec.Path,
				Type:              spec.DiskType,
				AllowScheduling:   spec.AllowScheduling,
				EvictionRequested: spec.EvictionRequested,
				Schedulable:       meta.IsStatusConditionTrue(status.Conditions, longhornv1.DiskConditionSchedulable),
				Tags:              spec.Tags,
				StorageMaximum:    status.StorageMaximum,
				StorageAvailable:  status.StorageAvailable,
				StorageReserved:   spec.StorageReserved,
				StorageLimit:      ds.Status.StorageLimit,
				StorageScheduled:  max(scheduled, 0),
			})
		}
		out = append(out, pn)
	}
	return out
}

// heldFor returns the bytes ds counts for volume's reservation, granted or
// still pending: the volume's replica takes them over (handoff).
func heldFor(ds *longhornv1.DiskSchedule, volume string) int64 {
	res, inSpec := ds.Spec.Reservations[volume]
	if !inSpec {
		return 0
	}
	st, decided := ds.Status.Reservations[volume]
	if decided && st.RequestedSize == res.Size && st.Pod == res.Pod {
		if st.State == longhornv1.ReservationStateScheduled {
			return st.ScheduledSize
		}
		return 0
	}
	if _, replicaPending := ds.Spec.Replicas[res.Replica]; res.Replica != "" && replicaPending {
		return 0 // charged to the replica, not counted twice
	}
	return res.Size
}

// reservedDisk returns the UUID of a disk on node whose ledger holds (or is
// deciding) a reservation for volume, or "".
func reservedDisk(ledgers map[string]*longhornv1.DiskSchedule, node, volume string) string {
	best := ""
	for uuid, ds := range ledgers {
		if ds.Spec.NodeID == node && heldFor(ds, volume) > 0 && (best == "" || uuid < best) {
			best = uuid
		}
	}
	return best
}

// decision is a replica's ledger entry as the volume controller sees it.
type decision int

const (
	decisionMissing decision = iota
	decisionPending
	decisionGranted
	decisionRejected
)

// decisionOf returns the ledger's decision on replica's request of size bytes.
func decisionOf(ds *longhornv1.DiskSchedule, replica string, size int64) (decision, string) {
	if ds == nil {
		return decisionMissing, ""
	}
	requested, ok := ds.Spec.Replicas[replica]
	if !ok {
		return decisionMissing, ""
	}
	st, decided := ds.Status.Replicas[replica]
	if !decided || st.RequestedSize != int64(requested) {
		return decisionPending, ""
	}
	if int64(requested) != size {
		return decisionPending, ""
	}
	if st.State == longhornv1.RequestStateScheduled && st.ScheduledSize == size {
		return decisionGranted, ""
	}
	return decisionRejected, st.Message
}
