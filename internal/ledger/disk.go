package ledger

import (
	"fmt"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/conditions"
)

// DiskOf returns the ledger's view of the disk named diskName with UUID
// diskUUID on Longhorn's node: its limit (rule 1, from the disk's
// status.storageMaximum and spec.storageReserved and the
// storage-over-provisioning-percentage setting), whether it accepts new
// requests (rule 8), and its actual space as Longhorn last measured it
// (status.storageMaximum, status.storageAvailable, what
// status.scheduledReplica and status.scheduledBackingImage counted then,
// and the storage-minimal-available-percentage setting), for Longhorn's
// actual-space rule. It is the one place the ledger reads Longhorn's Node.
// found is false when node is nil or does not hold that disk with that
// UUID; the Disk then refuses new requests and has a zero limit, which the
// caller may replace with the limit it last knew.
//
// Longhorn's node Schedulable condition already accounts for a cordoned
// Kubernetes node while disable-scheduling-on-cordoned-node is true. The
// disk's own Schedulable condition is Longhorn's actual-space rule for an
// empty replica; the ledger applies that rule itself to every new replica
// (ActualSpace.Failure), counting its own grants since the measure.
func DiskOf(node *lhv1.Node, diskName, diskUUID string, overProvisioningPercentage, minimalAvailablePercentage int64) (disk Disk, found bool) {
	if node == nil {
		return Disk{Reason: dsv1.DiskScheduleReasonDiskNotFound, Message: "the Longhorn node is not found"}, false
	}
	spec, inSpec := node.Spec.Disks[diskName]
	status := node.Status.DiskStatus[diskName]
	if !inSpec || status == nil || status.DiskUUID != diskUUID {
		return Disk{Reason: dsv1.DiskScheduleReasonDiskNotFound,
			Message: fmt.Sprintf("disk %s with UUID %s is not on node %s", diskName, diskUUID, node.Name)}, false
	}
	disk = Disk{
		Limit:       Limit(status.StorageMaximum, spec.StorageReserved, overProvisioningPercentage),
		Schedulable: true, Reason: dsv1.DiskScheduleReasonSchedulable, Message: "new requests can be granted",
		Space: &ActualSpace{
			Maximum: status.StorageMaximum, Available: status.StorageAvailable,
			MinimalAvailablePercentage: minimalAvailablePercentage,
			Replicas:                   names(status.ScheduledReplica),
			BackingImages:              names(status.ScheduledBackingImage),
		},
	}
	refuse := func(reason, msg string) (Disk, bool) {
		disk.Schedulable, disk.Reason, disk.Message = false, reason, msg
		return disk, true
	}
	if c, ok := conditions.Longhorn(node.Status.Conditions, lhv1.NodeConditionTypeReady); !ok || c.Status != lhv1.ConditionStatusTrue {
		return refuse(dsv1.DiskScheduleReasonNodeNotReady, "node "+node.Name+" is not ready"+because(c))
	}
	if c, ok := conditions.Longhorn(node.Status.Conditions, lhv1.NodeConditionTypeSchedulable); !ok || c.Status != lhv1.ConditionStatusTrue {
		return refuse(dsv1.DiskScheduleReasonNodeUnschedulable, "node "+node.Name+" is not schedulable"+because(c))
	}
	switch {
	case !node.Spec.AllowScheduling:
		return refuse(dsv1.DiskScheduleReasonNodeSchedulingDisabled, "scheduling is disabled on node "+node.Name)
	case node.Spec.EvictionRequested:
		return refuse(dsv1.DiskScheduleReasonNodeEvictionRequested, "eviction is requested for node "+node.Name)
	case !spec.AllowScheduling:
		return refuse(dsv1.DiskScheduleReasonDiskSchedulingDisabled, "scheduling is disabled on disk "+diskName)
	case spec.EvictionRequested:
		return refuse(dsv1.DiskScheduleReasonDiskEvictionRequested, "eviction is requested for disk "+diskName)
	}
	if c, ok := conditions.Longhorn(status.Conditions, lhv1.DiskConditionTypeReady); !ok || c.Status != lhv1.ConditionStatusTrue {
		return refuse(dsv1.DiskScheduleReasonDiskNotReady, "disk "+diskName+" is not ready"+because(c))
	}
	return disk, true
}

// names returns the keys of m as a set.
func names(m map[string]int64) map[string]bool {
	out := make(map[string]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}

// because quotes Longhorn's reason and message for a condition, when it has one.
func because(c lhv1.Condition) string {
	switch {
	case c.Reason != "" && c.Message != "":
		return fmt.Sprintf(" (%s: %s)", c.Reason, c.Message)
	case c.Reason != "":
		return fmt.Sprintf(" (%s)", c.Reason)
	case c.Type == "":
		return " (no condition reported)"
	}
	return ""
}
