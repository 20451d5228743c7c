package ledger

import "fmt"

// ActualSpace is a disk's actual space as Longhorn's node controller last
// reported it in the Node's disk status, for Longhorn's actual-space rule
// (ActualSpace.Failure).
type ActualSpace struct {
	// Maximum is the disk's status.storageMaximum.
	Maximum int64
	// Available is the disk's status.storageAvailable: the bytes actually
	// free when Longhorn measured the disk.
	Available int64
	// MinimalAvailablePercentage is Longhorn's
	// storage-minimal-available-percentage setting.
	MinimalAvailablePercentage int64
	// Replicas and BackingImages name what Longhorn had counted on the disk
	// when it wrote that status (status.scheduledReplica and
	// status.scheduledBackingImage). A grant of the ledger they do not name
	// was placed since: its data is not in Available yet.
	Replicas, BackingImages map[string]bool
}

// counted reports whether Longhorn had counted the entry name of kind k on
// the disk when it last measured it.
func (s ActualSpace) counted(k Kind, name string) bool {
	if k == BackingImage {
		return s.BackingImages[name]
	}
	return s.Replicas[name]
}

// MinimalAvailable returns the bytes Longhorn's actual-space rule keeps
// free on a disk: maximum × minimalAvailablePercentage / 100, truncated,
// exact and without overflow, never below 0. (Longhorn computes it in
// float64, which can differ by a few bytes on disks of tens of TiB.)
func MinimalAvailable(maximum, minimalAvailablePercentage int64) int64 {
	if maximum <= 0 || minimalAvailablePercentage <= 0 {
		return 0
	}
	return Limit(maximum, 0, minimalAvailablePercentage)
}

// HasActualSpace is Longhorn's actual-space condition
// (scheduler.IsSchedulableToDisk): a disk may take a replica whose data is
// actualSize bytes when
//
//	available − actualSize > maximum × minimalAvailablePercentage / 100
//
// (strict). A disk of unknown size (maximum or available not positive)
// never may. With actualSize 0 it is the disk's Schedulable condition.
func HasActualSpace(available, actualSize, maximum, minimalAvailablePercentage int64) bool {
	if maximum <= 0 || available <= 0 {
		return false
	}
	// available > 0 and the minimum ≥ 0: the difference cannot overflow.
	return actualSize < available-MinimalAvailable(maximum, minimalAvailablePercentage)
}

// Failure returns why the disk cannot take a replica whose data is
// actualSize bytes once since bytes the ledger granted after Longhorn's
// measure are taken as well, in numbers; "" when it can. It is Longhorn's
// actual-space rule with the grants Longhorn's status does not count yet
// counted, so two placements cannot both take the last free bytes.
func (s ActualSpace) Failure(since, actualSize int64) string {
	switch {
	case s.Maximum <= 0:
		return fmt.Sprintf("Longhorn reports no size for the disk (storageMaximum %d)", s.Maximum)
	case s.Available <= 0:
		return fmt.Sprintf("Longhorn reports no actual space available on the disk (storageAvailable %d)", s.Available)
	}
	taken := AddSat(max(since, 0), max(actualSize, 0))
	if HasActualSpace(s.Available, taken, s.Maximum, s.MinimalAvailablePercentage) {
		return ""
	}
	minimal := MinimalAvailable(s.Maximum, s.MinimalAvailablePercentage)
	return fmt.Sprintf("not enough actual space: %s available as Longhorn last measured it, less %s granted here since and %s of the replica's data, leaves %s, not more than the %s that storage-minimal-available-percentage %d%% of %s keeps free",
		Bytes(s.Available), Bytes(since), Bytes(actualSize), signedBytes(s.Available, taken), Bytes(minimal), s.MinimalAvailablePercentage, Bytes(s.Maximum))
}

// signedBytes formats a − b (both ≥ 0) for messages, "-" and all.
func signedBytes(a, b int64) string {
	if a >= b {
		return Bytes(a - b)
	}
	return "-" + Bytes(b-a)
}
