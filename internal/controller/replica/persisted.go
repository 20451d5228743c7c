package replica

import (
	"fmt"
	"strconv"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
)

// Persisted is the replicas' part of the mirror (rules 7 and 10): what
// Longhorn has persisted on ds's disk, counted as Longhorn's node
// controller counts it, each replica whose spec.diskID is the disk at its
// own spec.volumeSize (a growth the gate did not see is requested like any
// growth), by name; and, by name, why an entry of ds will never be backed
// (lost), to be released at once.
//
// One data directory is counted once: a replica that shares its disk and
// data directory with another replica of its volume (a clone of a v1 live
// migration or a live engine upgrade) is counted under the one that has a
// ledger entry (ledger.SharedData), and an entry of its own is lost.
//
// others are the Replicas of entries that are not on the disk. An entry of
// one that Longhorn persisted on another disk will not be backed here
// (Longhorn does not move a placed replica between disks), nor one whose
// resourceVersion has moved past the version the write placing it here was
// admitted at (spec.replicaVersions) without this disk: that write lost.
func Persisted(ds *dsv1.DiskSchedule, replicas []lhv1.Replica, others map[string]*lhv1.Replica) (sizes map[string]int64, lost map[string]string) {
	sizes, lost = map[string]int64{}, map[string]string{}
	shared := ledger.SharedData(replicas, func(r *lhv1.Replica) bool {
		_, ok := ds.Spec.Replicas[r.Name]
		return ok
	})
	for i := range replicas {
		rep := &replicas[i]
		if rep.Spec.DiskID != ds.Name {
			continue
		}
		if counted, ok := shared[rep.Name]; ok {
			lost[rep.Name] = fmt.Sprintf("shares its data directory with replica %s, which counts it", counted)
			continue
		}
		sizes[rep.Name] = max(rep.Spec.VolumeSize, 0)
	}
	for name, rep := range others {
		admitted := ds.Spec.ReplicaVersions[name]
		switch {
		case rep.Spec.DiskID != "" && rep.Spec.DiskID != ds.Name:
			lost[name] = "persisted on disk " + rep.Spec.DiskID
		case movedPast(rep.ResourceVersion, admitted):
			lost[name] = fmt.Sprintf("the write placing it here lost: the replica moved from resourceVersion %s to %s without this disk",
				admitted, rep.ResourceVersion)
		}
	}
	if len(lost) == 0 {
		lost = nil
	}
	return sizes, lost
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
