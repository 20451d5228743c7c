package ledger

import (
	"cmp"
	"slices"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// dataDirectory is where a replica keeps its data: one data directory of
// one volume on one disk.
type dataDirectory struct {
	volume, disk, directory string
}

// directoryOf returns the data directory of r, and false while r has no
// disk or directory yet.
func directoryOf(r *lhv1.Replica) (dataDirectory, bool) {
	d := dataDirectory{volume: r.Spec.VolumeName, disk: r.Spec.DiskID, directory: r.Spec.DataDirectoryName}
	return d, d.volume != "" && d.disk != "" && d.directory != ""
}

// SharesData reports whether a and b are two replicas of one volume that
// keep their data in the same data directory of the same disk: Longhorn's
// v1 live migration and live engine upgrade clone a replica so
// (volume_controller.go createAndStartMatchingReplicas), and the clone
// takes no new space on the disk.
func SharesData(a, b *lhv1.Replica) bool {
	da, okA := directoryOf(a)
	db, okB := directoryOf(b)
	return okA && okB && a.Name != b.Name && da == db
}

// SharedData returns, for replicas that share a data directory (SharesData),
// each replica that is not counted mapped to the one that is: one data
// directory on one disk is counted once in the ledger, under the replica
// that has a ledger entry (hasEntry), the first by name when several or none
// have one. A replica alone in its directory is not in the map.
func SharedData(replicas []lhv1.Replica, hasEntry func(*lhv1.Replica) bool) map[string]string {
	groups := map[dataDirectory][]*lhv1.Replica{}
	for i := range replicas {
		if d, ok := directoryOf(&replicas[i]); ok {
			groups[d] = append(groups[d], &replicas[i])
		}
	}
	out := map[string]string{}
	for _, group := range groups {
		if len(group) < 2 {
			continue
		}
		slices.SortFunc(group, func(a, b *lhv1.Replica) int { return cmp.Compare(a.Name, b.Name) })
		counted := group[0]
		for _, r := range group {
			if hasEntry(r) {
				counted = r
				break
			}
		}
		for _, r := range group {
			if r != counted && r.Name != counted.Name {
				out[r.Name] = counted.Name
			}
		}
	}
	return out
}
