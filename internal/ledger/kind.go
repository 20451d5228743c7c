package ledger

import (
	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

// Kind is a kind of ledger entry: the map of a DiskSchedule's spec and
// status the entry lives in. Code that treats every kind alike loops over
// Kinds and reaches each kind's maps through Requests and Decisions.
type Kind string

const (
	// Replica entries live in spec.replicas and status.replicas, one per
	// Longhorn Replica on the disk.
	Replica Kind = "replica"
	// BackingImage entries live in spec.backingImages and
	// status.backingImages, one per backing image's copy on the disk.
	BackingImage Kind = "backingImage"
)

// Kinds returns the entry kinds in the order the ledger decides them:
// replicas first, so a backing-image copy sees the replicas granted in the
// same decision.
func Kinds() [2]Kind {
	return [2]Kind{Replica, BackingImage}
}

// Field returns the JSON name of k's map in the spec and the status.
func (k Kind) Field() string {
	if k == BackingImage {
		return "backingImages"
	}
	return "replicas"
}

// Requests returns the map of spec that holds k's requests, as a pointer,
// so that a writer can create it.
func Requests(spec *dsv1.DiskScheduleSpec, k Kind) *map[string]dsv1.RequestedBytes {
	if k == BackingImage {
		return &spec.BackingImages
	}
	return &spec.Replicas
}

// Decisions returns the map of status that holds k's decisions, as a
// pointer, so that a writer can create it.
func Decisions(status *dsv1.DiskScheduleStatus, k Kind) *map[string]dsv1.RequestStatus {
	if k == BackingImage {
		return &status.BackingImages
	}
	return &status.Replicas
}
