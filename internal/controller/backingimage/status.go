package backingimage

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhornv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

// Event reasons.
const (
	// EventReasonCopyRejected is the reason of the Event emitted when a disk's
	// ledger rejects a copy, which is then placed elsewhere.
	EventReasonCopyRejected = "CopyRejected"
)

// maxFileStatuses is diskFileStatusMap's maxProperties: earlier failures
// are forgotten first when it would hold more.
const maxFileStatuses = 256

// copies is what one reconcile learnt about an image's copies.
type copies struct {
	// want is minNumberOfCopies.
	want int
	// size is the image's size, the bytes each copy requests.
	size int64
	// granted and pending are the disks of diskFileSpecMap whose ledger
	// granted the copy, or has not decided yet (new placements included).
	granted, pending []string
	// failed maps a disk removed from diskFileSpecMap in this reconcile to why.
	failed map[string]string
	// short is true when fewer disks than missing copies could be found.
	short bool
	// sel is the choice of disks for the missing copies.
	sel selection
}

// fileStatuses returns the next status.diskFileStatusMap: ready or pending
// for every disk of diskFileSpecMap, failed with the reason for the disks
// given up in this reconcile, and earlier failures kept for people until
// the disk takes a copy again.
func fileStatuses(prev map[string]longhornv1.BackingImageDiskFileStatus, c copies) map[string]longhornv1.BackingImageDiskFileStatus {
	out := map[string]longhornv1.BackingImageDiskFileStatus{}
	for uuid, st := range prev {
		if st.State == longhornv1.BackingImageFileFailed {
			out[uuid] = st
		}
	}
	for uuid, why := range c.failed {
		out[uuid] = longhornv1.BackingImageDiskFileStatus{State: longhornv1.BackingImageFileFailed, Message: truncate(why, 1024)}
	}
	for _, uuid := range c.granted {
		out[uuid] = longhornv1.BackingImageDiskFileStatus{State: longhornv1.BackingImageFileReady}
	}
	for _, uuid := range c.pending {
		out[uuid] = longhornv1.BackingImageDiskFileStatus{State: longhornv1.BackingImageFilePending,
			Message: fmt.Sprintf("waiting for the ledger of disk %s to grant %s", uuid, bytes(c.size))}
	}
	for _, uuid := range sortedKeys(prev) {
		if len(out) <= maxFileStatuses {
			break
		}
		if _, current := c.failed[uuid]; !current && out[uuid].State == longhornv1.BackingImageFileFailed {
			delete(out, uuid)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// copiesCondition returns the CopiesScheduled condition: True once want
// copies are granted, else False with InsufficientDisks when no disk could
// be found for a missing copy, or CopiesPending while the ledgers decide.
func copiesCondition(c copies, generation int64) metav1.Condition {
	cond := metav1.Condition{Type: longhornv1.BackingImageConditionCopiesScheduled, ObservedGeneration: generation}
	switch {
	case len(c.granted) >= c.want:
		cond.Status, cond.Reason = metav1.ConditionTrue, longhornv1.BackingImageReasonCopiesScheduled
		cond.Message = fmt.Sprintf("%d copies of %s granted, on disks %s", len(c.granted), bytes(c.size), joinSorted(c.granted))
	case c.short:
		cond.Status, cond.Reason = metav1.ConditionFalse, longhornv1.BackingImageReasonInsufficientDisks
		cond.Message = insufficientMessage(c.want, len(c.granted), len(c.pending), c.size, c.sel)
	default:
		cond.Status, cond.Reason = metav1.ConditionFalse, longhornv1.BackingImageReasonCopiesPending
		cond.Message = fmt.Sprintf("%d copies of %s wanted, %d granted; waiting for the ledgers of disks %s to decide",
			c.want, bytes(c.size), len(c.granted), joinSorted(c.pending))
	}
	cond.Message = truncate(cond.Message, 32768)
	return cond
}

// sizeUnknownCondition is CopiesScheduled while status.size is not known.
func sizeUnknownCondition(generation int64) metav1.Condition {
	return metav1.Condition{
		Type: longhornv1.BackingImageConditionCopiesScheduled, Status: metav1.ConditionFalse,
		Reason: longhornv1.BackingImageReasonSizeUnknown, ObservedGeneration: generation,
		Message: "copies are placed once the image's size is known",
	}
}

func joinSorted(s []string) string {
	return strings.Join(sortedCopy(s), ", ")
}

// truncate cuts s to at most n bytes, marking the cut, without splitting a character.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n-3], "") + "..."
}
