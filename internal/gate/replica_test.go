package gate

import (
	"reflect"
	"regexp"
	"strings"
	"testing"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/testenv"
)

const gi = int64(1) << 30

// What a Replica write of Longhorn's asks of its disk's ledger: the
// replica's own volumeSize, nothing for its backing image's copy (asked
// when Longhorn adds the disk to the image), and nothing for a clone that
// shares its disk and data directory with a replica of its volume.
func TestReplicaNeed(t *testing.T) {
	const ns, disk, other = "longhorn-system", "uuid-0", "uuid-1"
	unscheduled := func(name, volume string, size int64) *lhv1.Replica {
		return testenv.Replica(ns, name, testenv.ReplicaFixture{Volume: volume, Size: size})
	}
	placed := func(name, volume string, size int64, uuid string) *lhv1.Replica {
		return testenv.Replica(ns, name, testenv.ReplicaFixture{Volume: volume, Size: size, NodeID: "node-0", DiskName: "disk-0", DiskID: uuid,
			State: lhv1.InstanceStateRunning})
	}
	withImage := func(r *lhv1.Replica) *lhv1.Replica { r.Spec.BackingImage = "default-image-x7k2p"; return r }
	withVersion := func(r *lhv1.Replica, rv string) *lhv1.Replica { v := r.DeepCopy(); v.ResourceVersion = rv; return v }
	// clone is what Longhorn's volume controller creates for a v1 live
	// migration or a live engine upgrade (duplicateReplica): a new name,
	// the same spec, disk and data directory.
	clone := func(r *lhv1.Replica, name string) *lhv1.Replica {
		c := r.DeepCopy()
		c.Name, c.ResourceVersion = name, ""
		c.Spec.Active = false
		return c
	}
	grown := func(r *lhv1.Replica, size int64) *lhv1.Replica { g := r.DeepCopy(); g.Spec.VolumeSize = size; return g }
	moved := func(r *lhv1.Replica, uuid string) *lhv1.Replica {
		m := r.DeepCopy()
		m.Spec.DiskID, m.Spec.DataDirectoryName = uuid, r.Spec.VolumeName+"-9f8e7d6c"
		return m
	}
	original := placed("pvc-a-r-0a1b2c3d", "pvc-a", 60*gi, disk)
	sibling := placed("pvc-a-r-4e5f6a7b", "pvc-a", 60*gi, other)
	// A full disk: 100Gi granted of a 100Gi limit, pvc-a-r-0a1b2c3d among them.
	full := &dsv1.DiskSchedule{Spec: dsv1.DiskScheduleSpec{Name: "disk-0", NodeID: "node-0",
		Replicas: map[string]dsv1.RequestedBytes{original.Name: dsv1.RequestedBytes(60 * gi), "pvc-b-r-1": dsv1.RequestedBytes(40 * gi)}}}
	for _, tc := range []struct {
		name     string
		old, rep *lhv1.Replica
		siblings []*lhv1.Replica
		ds       *dsv1.DiskSchedule
		// want is the ask, nil when the write asks nothing; reason is part
		// of the reason then.
		want   *replicaAsk
		reason string
	}{
		{name: "a replica placed on a disk asks its volumeSize",
			old: unscheduled("pvc-c-r-1", "pvc-c", 10*gi), rep: placed("pvc-c-r-1", "pvc-c", 10*gi, disk),
			want: &replicaAsk{replica: "pvc-c-r-1", volume: "pvc-c", size: 10 * gi}},
		{name: "a placement records the resourceVersion its write is admitted at",
			old: withVersion(unscheduled("pvc-c-r-1", "pvc-c", 10*gi), "4711"), rep: withVersion(placed("pvc-c-r-1", "pvc-c", 10*gi, disk), "4711"),
			want: &replicaAsk{replica: "pvc-c-r-1", volume: "pvc-c", size: 10 * gi, version: "4711"}},
		{name: "a growth records none: the replica is on the disk already",
			old: withVersion(original, "4711"), rep: withVersion(grown(original, 80*gi), "4711"), siblings: []*lhv1.Replica{original}, ds: full,
			want: &replicaAsk{replica: original.Name, volume: "pvc-a", size: 80 * gi}},
		{name: "a replica with a backing image asks its volumeSize alone",
			old: withImage(unscheduled("pvc-c-r-1", "pvc-c", 10*gi)), rep: withImage(placed("pvc-c-r-1", "pvc-c", 10*gi, disk)),
			want: &replicaAsk{replica: "pvc-c-r-1", volume: "pvc-c", size: 10 * gi}},
		{name: "a replica created on a disk asks its volumeSize",
			rep:  placed("pvc-c-r-1", "pvc-c", 10*gi, disk),
			want: &replicaAsk{replica: "pvc-c-r-1", volume: "pvc-c", size: 10 * gi}},
		{name: "a migration clone on a full disk takes no new space",
			rep: clone(original, "pvc-a-r-8c9d0e1f"), siblings: []*lhv1.Replica{original, sibling}, ds: full,
			reason: "shares disk uuid-0 and data directory " + original.Spec.DataDirectoryName + " with replica pvc-a-r-0a1b2c3d of volume pvc-a: it takes no new space"},
		{name: "a clone of a replica the ledger does not count yet takes no new space either",
			rep: clone(original, "pvc-a-r-00000000"), siblings: []*lhv1.Replica{original}, ds: &dsv1.DiskSchedule{},
			reason: "with replica pvc-a-r-0a1b2c3d"},
		{name: "a clone of a replica on another disk takes space",
			rep: clone(sibling, "pvc-a-r-8c9d0e1f"), siblings: []*lhv1.Replica{original}, ds: full,
			want: &replicaAsk{replica: "pvc-a-r-8c9d0e1f", volume: "pvc-a", size: 60 * gi}},
		{name: "a replica of another volume in a directory of the same name takes space",
			rep: func() *lhv1.Replica {
				r := clone(original, "pvc-z-r-1")
				r.Spec.VolumeName = "pvc-z"
				return r
			}(), siblings: nil, ds: full,
			want: &replicaAsk{replica: "pvc-z-r-1", volume: "pvc-z", size: 60 * gi}},
		{name: "the clone grows with the replica counted for the directory",
			old: clone(original, "pvc-a-r-8c9d0e1f"), rep: grown(clone(original, "pvc-a-r-8c9d0e1f"), 80*gi),
			siblings: []*lhv1.Replica{original, clone(original, "pvc-a-r-8c9d0e1f")}, ds: full,
			reason: "with replica pvc-a-r-0a1b2c3d"},
		{name: "the replica counted for a shared directory asks its growth",
			old: original, rep: grown(original, 80*gi), siblings: []*lhv1.Replica{original, clone(original, "pvc-a-r-8c9d0e1f")}, ds: full,
			want: &replicaAsk{replica: original.Name, volume: "pvc-a", size: 80 * gi}},
		{name: "a replica moved to another disk asks there",
			old: original, rep: moved(original, other), siblings: []*lhv1.Replica{original}, ds: full,
			want: &replicaAsk{replica: original.Name, volume: "pvc-a", size: 60 * gi}},
		{name: "a replica that stays and does not grow asks nothing",
			old: original, rep: original, ds: full, reason: "takes no new space"},
		{name: "an unscheduled replica asks nothing",
			rep: unscheduled("pvc-c-r-1", "pvc-c", 10*gi), reason: "no disk yet"},
		{name: "a replica of no size asks nothing",
			rep: placed("pvc-c-r-1", "pvc-c", 0, disk), reason: "no space"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			siblings := make([]lhv1.Replica, 0, len(tc.siblings))
			for _, s := range tc.siblings {
				siblings = append(siblings, *s)
			}
			got, reason := replicaNeed(tc.old, tc.rep, siblings, tc.ds)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ask %+v (%q), want %+v", got, reason, tc.want)
			}
			if !strings.Contains(reason, tc.reason) {
				t.Errorf("reason %q does not say %q", reason, tc.reason)
			}
		})
	}
}

// A refused growth reaches Longhorn's CSI driver as OutOfRange: its
// ControllerExpandVolume maps the error of its volume update to OutOfRange
// when it matches this expression (csi/controller_server.go, longhorn-manager
// v1.12.0), and to Internal, retried for ever, otherwise.
var longhornOutOfRange = regexp.MustCompile("failed to schedule .* more bytes to disk")

func TestExpansionRefusal(t *testing.T) {
	ds := &dsv1.DiskSchedule{Spec: dsv1.DiskScheduleSpec{Name: "disk-1", NodeID: "node-1",
		Replicas: map[string]dsv1.RequestedBytes{"pvc-a-r-1": dsv1.RequestedBytes(20 * gi)}},
		Status: dsv1.DiskScheduleStatus{Replicas: map[string]dsv1.RequestStatus{"pvc-a-r-1": {
			State: dsv1.RequestStateRejected, RequestedSize: 20 * gi, ScheduledSize: 10 * gi,
			Message: "expansion from 10Gi to 20Gi needs 10Gi more, 4Gi free of limit 100Gi"}}}}
	ask := replicaAsk{replica: "pvc-a-r-1", size: 20 * gi}
	msg := expansionRefusal(10*gi, "uuid-1", "volume pvc-a grows from 10Gi to 20Gi", ask.refusal(ds))
	// What Longhorn's API returns to its CSI driver: the API server's
	// denial around the gate's answer, wrapped by Longhorn's manager.
	resp := deny(msg).response()
	longhornError := "unable to expand volume pvc-a: admission webhook \"volumes.gate.diskschedule.longhorn.io\" denied the request: " + resp.Result.Message
	if !longhornOutOfRange.MatchString(longhornError) {
		t.Errorf("Longhorn's CSI driver does not map %q to OutOfRange", longhornError)
	}
	for _, part := range []string{
		"failed to schedule 10737418240 more bytes to disk uuid-1",
		"volume pvc-a grows from 10Gi to 20Gi",
		"replica pvc-a-r-1 needs 20Gi on disk disk-1 of node node-1",
		"10Gi more, 4Gi free of limit 100Gi",
	} {
		if !strings.Contains(msg, part) {
			t.Errorf("refusal %q does not say %q", msg, part)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("refusal %q spans lines; Longhorn's expression matches within one", msg)
	}
	// Other refusals are not capacity refusals: they stay Internal, retried.
	if other := undecided("volume pvc-a grows from 10Gi to 20Gi", errNoLedger).message; longhornOutOfRange.MatchString(other) {
		t.Errorf("%q would be reported infeasible", other)
	}
}
