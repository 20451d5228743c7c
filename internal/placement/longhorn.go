package placement

import (
	"fmt"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"

	"github.com/longhorn/diskschedule/internal/conditions"
	"github.com/longhorn/diskschedule/internal/ledger"
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
				Limit:     ledger.Limit(st.StorageMaximum, spec.StorageReserved, s.OverProvisioningPercentage),
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
		Ready:             conditions.LonghornTrue(n.Status.Conditions, lhv1.NodeConditionTypeReady),
		Schedulable:       conditions.LonghornTrue(n.Status.Conditions, lhv1.NodeConditionTypeSchedulable),
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
			d.Schedulable = conditions.LonghornTrue(st.Conditions, lhv1.DiskConditionTypeSchedulable) &&
				conditions.LonghornTrue(st.Conditions, lhv1.DiskConditionTypeReady)
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

// failedReplicaMaxRetryCount is how many rebuilds of a failed replica
// Longhorn tries before it stops reusing it (scheduler.FailedReplicaMaxRetryCount).
const failedReplicaMaxRetryCount = 5

// FromLonghornReplica returns Longhorn's replica r of a volume as placement
// counts it, and false when it does not count at all, as longhorn-manager
// v1.12's scheduler counts the volume's replicas (getCurrentNodesAndZones,
// filterDisksWithMatchingReplicas):
//
//   - a replica not scheduled to a node does not count;
//   - a failed replica counts only while it may be reused (on a node and a
//     disk, fewer than 5 rebuild retries, not being evicted), and only for
//     disk anti-affinity once the volume is replenishing (see Replenishing);
//   - a replica being deleted counts for disk anti-affinity only;
//   - a replica being evicted counts, marked EvictionRequested.
func FromLonghornReplica(r *lhv1.Replica, replenishing bool) (Replica, bool) {
	if r.Spec.NodeID == "" {
		return Replica{}, false
	}
	failed := r.Spec.FailedAt != ""
	if failed && (r.Spec.DiskID == "" || r.Spec.RebuildRetryCount >= failedReplicaMaxRetryCount || r.Spec.EvictionRequested) {
		return Replica{}, false
	}
	return Replica{
		NodeID:            r.Spec.NodeID,
		DiskUUID:          r.Spec.DiskID,
		Healthy:           !failed,
		EvictionRequested: r.Spec.EvictionRequested,
		DiskOnly:          r.DeletionTimestamp != nil || (failed && replenishing),
	}, true
}

// Replenishing reports whether Longhorn replaces volume v's failed replicas
// now rather than waiting to reuse them: v is degraded and has been for
// longer than wait (the setting replica-replenishment-wait-interval) at
// now. A degraded volume whose status.lastDegradedAt is not a time is an
// error, as in Longhorn, which then schedules none of its replicas.
func Replenishing(v *lhv1.Volume, wait time.Duration, now time.Time) (bool, error) {
	if v.Status.Robustness != lhv1.VolumeRobustnessDegraded {
		return false, nil
	}
	at, err := time.Parse(time.RFC3339, v.Status.LastDegradedAt)
	if err != nil {
		return false, fmt.Errorf("volume %s: parsing status.lastDegradedAt: %w", v.Name, err)
	}
	return now.After(at.Add(wait)), nil
}
