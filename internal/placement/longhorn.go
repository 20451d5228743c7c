package placement

import (
	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"

	"github.com/longhorn/diskschedule/internal/settings"
)

// Space is one disk's scheduling space: the most bytes that may be
// scheduled on it and the bytes scheduled (or asked for) already.
type Space struct {
	Limit, Scheduled int64
}

// SpaceFunc returns the scheduling space of the disk with the given UUID,
// and false when it is unknown (the disk then takes no replica).
type SpaceFunc func(uuid string) (Space, bool)

// LonghornSpace is Longhorn's own view of a disk's scheduling space, the one
// longhorn-manager v1.12 schedules with: limit (storageMaximum −
// storageReserved) × storage-over-provisioning-percentage / 100 and the
// node's own status.diskStatus storageScheduled, with no ledger.
func LonghornSpace(n *lhv1.Node, s settings.Scheduling) SpaceFunc {
	return func(uuid string) (Space, bool) {
		for name, st := range n.Status.DiskStatus {
			if st == nil || st.DiskUUID != uuid {
				continue
			}
			spec := n.Spec.Disks[name]
			return Space{
				Limit:     StorageLimit(st.StorageMaximum, spec.StorageReserved, s.OverProvisioningPercentage),
				Scheduled: st.StorageScheduled,
			}, true
		}
		return Space{}, false
	}
}

// FromLonghorn returns Longhorn's node n as placement sees it, each disk's
// scheduling space given by space. Readiness and schedulability are
// Longhorn's own conditions (its Schedulable condition already accounts for
// a cordoned Kubernetes node and disable-scheduling-on-cordoned-node).
func FromLonghorn(n *lhv1.Node, space SpaceFunc) Node {
	out := Node{
		Name:              n.Name,
		Zone:              n.Status.Zone,
		Ready:             conditionTrue(n.Status.Conditions, lhv1.NodeConditionTypeReady),
		Schedulable:       conditionTrue(n.Status.Conditions, lhv1.NodeConditionTypeSchedulable),
		AllowScheduling:   n.Spec.AllowScheduling,
		EvictionRequested: n.Spec.EvictionRequested,
		Tags:              n.Spec.Tags,
	}
	for name, spec := range n.Spec.Disks {
		d := Disk{
			Name:              name,
			Path:              spec.Path,
			Type:              spec.Type,
			AllowScheduling:   spec.AllowScheduling,
			EvictionRequested: spec.EvictionRequested,
			Tags:              spec.Tags,
			StorageReserved:   spec.StorageReserved,
		}
		if st := n.Status.DiskStatus[name]; st != nil {
			d.UUID = st.DiskUUID
			d.Schedulable = conditionTrue(st.Conditions, lhv1.DiskConditionTypeSchedulable) &&
				conditionTrue(st.Conditions, lhv1.DiskConditionTypeReady)
			d.StorageMaximum = st.StorageMaximum
			d.StorageAvailable = st.StorageAvailable
			d.FSType = st.FSType
			if d.Type == "" {
				d.Type = st.Type
			}
		}
		if sp, ok := space(d.UUID); ok && d.UUID != "" {
			d.StorageLimit, d.StorageScheduled = sp.Limit, sp.Scheduled
		} else {
			d.UUID = "" // no known space: the disk takes nothing
		}
		out.Disks = append(out.Disks, d)
	}
	return out
}

// conditionTrue reports whether Longhorn's condition typ is True.
func conditionTrue(conds []lhv1.Condition, typ string) bool {
	for _, c := range conds {
		if c.Type == typ {
			return c.Status == lhv1.ConditionStatusTrue
		}
	}
	return false
}
