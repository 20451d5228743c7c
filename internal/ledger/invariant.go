package ledger

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

// Violation returns how the ledger status st breaks the ledger's
// invariant, or "" when it keeps it. Every status write keeps two promises:
// status.storageScheduled is the sum of the scheduledSize of every replica,
// backing-image and reservation entry, and it is at most
// status.storageLimit (rule 2), unless the ledger holds adopted allocations
// over its limit and says so with Overcommitted=True (rule 7).
func Violation(st dsv1.DiskScheduleStatus) string {
	if sum := scheduledSum(st); sum != st.StorageScheduled {
		return fmt.Sprintf("storageScheduled %s is not the sum of its entries' scheduled sizes, %s",
			Bytes(st.StorageScheduled), Bytes(sum))
	}
	if st.StorageScheduled > st.StorageLimit && !meta.IsStatusConditionTrue(st.Conditions, dsv1.DiskScheduleConditionOvercommitted) {
		return fmt.Sprintf("storageScheduled %s is over storageLimit %s without Overcommitted=True",
			Bytes(st.StorageScheduled), Bytes(st.StorageLimit))
	}
	return ""
}

// scheduledSum is the sum of the scheduled sizes of every entry of st,
// saturated (AddSat).
func scheduledSum(st dsv1.DiskScheduleStatus) int64 {
	var sum int64
	for _, e := range st.Replicas {
		sum = AddSat(sum, e.ScheduledSize)
	}
	for _, e := range st.BackingImages {
		sum = AddSat(sum, e.ScheduledSize)
	}
	for _, e := range st.Reservations {
		sum = AddSat(sum, e.ScheduledSize)
	}
	return sum
}
