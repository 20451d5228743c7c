package replica

import (
	"reflect"
	"testing"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

// What the mirror counts of replicas on a disk is what Longhorn's node
// controller adds to its storageScheduled (ledger.PersistedByDisk): each
// replica at its own volumeSize, one data directory once, under the
// replica with an entry; and an entry no write will back is lost (Lost).
// persisted is what the mirror reads of the replicas.
type persisted struct {
	Replicas map[string]int64
	Lost     map[string]string
}

func TestLost(t *testing.T) {
	const ns, disk = "longhorn-system", "uuid-0"
	placed := func(name, volume string, size int64) lhv1.Replica {
		return *testenv.Replica(ns, name, testenv.ReplicaFixture{Volume: volume, Size: size, NodeID: "node-0", DiskName: "disk-0",
			DiskID: disk, State: lhv1.InstanceStateRunning})
	}
	clone := func(r lhv1.Replica, name string) lhv1.Replica {
		c := *r.DeepCopy()
		c.Name = name
		return c
	}
	ledgerWith := func(replicas ...string) *dsv1.DiskSchedule {
		ds := &dsv1.DiskSchedule{}
		ds.Name = disk
		ds.Spec.Replicas = map[string]dsv1.RequestedBytes{}
		for _, r := range replicas {
			ds.Spec.Replicas[r] = dsv1.RequestedBytes(gi)
		}
		return ds
	}
	original := placed("pvc-a-r-5b6c7d8e", "pvc-a", 20*gi)
	placedOn := func(name, volume, uuid string) *lhv1.Replica {
		return testenv.Replica(ns, name, testenv.ReplicaFixture{Volume: volume, Size: 10 * gi, NodeID: "node-1", DiskName: "disk-1", DiskID: uuid})
	}
	version := func(r *lhv1.Replica, rv string) *lhv1.Replica { r.ResourceVersion = rv; return r }
	withVersions := func(ds *dsv1.DiskSchedule, v map[string]string) *dsv1.DiskSchedule {
		ds.Spec.ReplicaVersions = v
		return ds
	}
	for _, tc := range []struct {
		name     string
		ds       *dsv1.DiskSchedule
		replicas []lhv1.Replica
		others   map[string]*lhv1.Replica
		want     persisted
	}{
		{name: "a replica of a volume whose expansion is pending counts at its own volumeSize",
			// The volume's spec.size is 30Gi already; Longhorn has not
			// written it into the replica yet, and counts 20Gi.
			ds: ledgerWith(), replicas: []lhv1.Replica{placed("pvc-a-r-1", "pvc-a", 20*gi)},
			want: persisted{Replicas: map[string]int64{"pvc-a-r-1": 20 * gi}}},
		{name: "a migration clone is counted with the replica that has the entry",
			ds: ledgerWith(original.Name), replicas: []lhv1.Replica{original, clone(original, "pvc-a-r-0a1b2c3d")},
			want: persisted{Replicas: map[string]int64{original.Name: 20 * gi}}},
		{name: "an entry the clone has besides is lost",
			ds: ledgerWith(original.Name, "pvc-a-r-ffffffff"), replicas: []lhv1.Replica{original, clone(original, "pvc-a-r-ffffffff")},
			want: persisted{Replicas: map[string]int64{original.Name: 20 * gi},
				Lost: map[string]string{"pvc-a-r-ffffffff": "shares its data directory with replica " + original.Name + ", which counts it"}}},
		{name: "the original gone, the clone counts",
			ds: ledgerWith(original.Name), replicas: []lhv1.Replica{clone(original, "pvc-a-r-0a1b2c3d")},
			want: persisted{Replicas: map[string]int64{"pvc-a-r-0a1b2c3d": 20 * gi}}},
		{name: "a grant whose replica Longhorn persisted on another disk is lost",
			ds:     withVersions(ledgerWith("pvc-b-r-1"), map[string]string{"pvc-b-r-1": "100"}),
			others: map[string]*lhv1.Replica{"pvc-b-r-1": version(placedOn("pvc-b-r-1", "pvc-b", "uuid-1"), "101")},
			want: persisted{Replicas: map[string]int64{},
				Lost: map[string]string{"pvc-b-r-1": "persisted on disk uuid-1"}}},
		{name: "a grant whose admitted write lost is lost: the replica moved past the version without this disk",
			ds:     withVersions(ledgerWith("pvc-b-r-1"), map[string]string{"pvc-b-r-1": "100"}),
			others: map[string]*lhv1.Replica{"pvc-b-r-1": version(placedOn("pvc-b-r-1", "pvc-b", ""), "120")},
			want: persisted{Replicas: map[string]int64{},
				Lost: map[string]string{"pvc-b-r-1": "the write placing it here lost: the replica moved from resourceVersion 100 to 120 without this disk"}}},
		{name: "a write that landed on this disk after the disk's replicas were listed is not lost",
			// The cache took the write between the mirror's list of the
			// disk's replicas and its read of the entry's Replica.
			ds:     withVersions(ledgerWith("pvc-b-r-1"), map[string]string{"pvc-b-r-1": "100"}),
			others: map[string]*lhv1.Replica{"pvc-b-r-1": version(placedOn("pvc-b-r-1", "pvc-b", disk), "101")},
			want:   persisted{Replicas: map[string]int64{}}},
		{name: "a write in flight: the replica is still at the admitted version",
			ds:     withVersions(ledgerWith("pvc-b-r-1"), map[string]string{"pvc-b-r-1": "100"}),
			others: map[string]*lhv1.Replica{"pvc-b-r-1": version(placedOn("pvc-b-r-1", "pvc-b", ""), "100")},
			want:   persisted{Replicas: map[string]int64{}}},
		{name: "a cache behind the admission says nothing",
			ds:     withVersions(ledgerWith("pvc-b-r-1"), map[string]string{"pvc-b-r-1": "100"}),
			others: map[string]*lhv1.Replica{"pvc-b-r-1": version(placedOn("pvc-b-r-1", "pvc-b", ""), "99")},
			want:   persisted{Replicas: map[string]int64{}}},
		{name: "without a recorded version the grant waits for the grace period",
			ds:     ledgerWith("pvc-b-r-1"),
			others: map[string]*lhv1.Replica{"pvc-b-r-1": version(placedOn("pvc-b-r-1", "pvc-b", ""), "120")},
			want:   persisted{Replicas: map[string]int64{}}},
		{name: "versions that are not integers are not compared",
			ds:     withVersions(ledgerWith("pvc-b-r-1"), map[string]string{"pvc-b-r-1": "a"}),
			others: map[string]*lhv1.Replica{"pvc-b-r-1": version(placedOn("pvc-b-r-1", "pvc-b", ""), "b")},
			want:   persisted{Replicas: map[string]int64{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			on := ledger.PersistedByDisk(tc.replicas, nil, func(r *lhv1.Replica) bool {
				_, ok := tc.ds.Spec.Replicas[r.Name]
				return ok
			})[disk]
			got := persisted{Replicas: on.Replicas, Lost: Lost(tc.ds, on.Shared, tc.others)}
			if got.Replicas == nil {
				got.Replicas = map[string]int64{} // nothing persisted on the disk
			}
			if tc.want.Lost == nil {
				// Shared replicas without an entry are named lost too;
				// only an entry of theirs is released.
				for name := range got.Lost {
					if _, ok := tc.ds.Spec.Replicas[name]; !ok {
						delete(got.Lost, name)
					}
				}
				if len(got.Lost) == 0 {
					got.Lost = nil
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("persisted:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
