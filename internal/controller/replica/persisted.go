package replica

import (
	"fmt"
	"strconv"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

// Lost is the replicas' part of the mirror (rule 10): why, by name, an
// entry of ds will never be backed, to be released at once rather than
// after the grace period.
//
// One data directory is counted once: a replica that shares its disk and
// data directory with another replica of its volume (a clone of a v1 live
// migration or a live engine upgrade) is counted under the one that has a
// ledger entry, and an entry of its own is lost; shared maps each such
// replica to the one counted (ledger.Persisted.Shared).
//
// others are the Replicas of entries that are not on the disk. An entry of
// one that Longhorn persisted on another disk will not be backed here
// (Longhorn does not move a placed replica between disks), nor one whose
// resourceVersion has moved past the version the write placing it here was
// admitted at (spec.replicaVersions) without this disk: that write lost. A
// Replica of others that is on this disk after all (the write landed
// between the caller's reading of the disk's replicas and of others) backs
// its entry, and is not lost.
func Lost(ds *dsv1.DiskSchedule, shared map[string]string, others map[string]*lhv1.Replica) map[string]string {
	lost := map[string]string{}
	for name, counted := range shared {
		lost[name] = fmt.Sprintf("shares its data directory with replica %s, which counts it", counted)
	}
	for name, rep := range others {
		admitted := ds.Spec.ReplicaVersions[name]
		switch {
		case rep.Spec.DiskID == ds.Name:
			// Persisted here after the disk's replicas were read: the
			// entry is backed, as the next reading shows.
		case rep.Spec.DiskID != "":
			lost[name] = "persisted on disk " + rep.Spec.DiskID
		case movedPast(rep.ResourceVersion, admitted):
			lost[name] = fmt.Sprintf("the write placing it here lost: the replica moved from resourceVersion %s to %s without this disk",
				admitted, rep.ResourceVersion)
		}
	}
	if len(lost) == 0 {
		return nil
	}
	return lost
}

// movedPast reports whether resourceVersion current is later than
// admitted. The API server's resourceVersions are opaque to clients in
// general; kube-apiserver's are etcd revisions, increasing integers, and
// are compared as such. Versions that are not (or none recorded) are never
// later: the entry then waits for the grace period.
func movedPast(current, admitted string) bool {
	c, errC := strconv.ParseUint(current, 10, 64)
	a, errA := strconv.ParseUint(admitted, 10, 64)
	return errC == nil && errA == nil && c > a
}
