package scenario

import (
	"testing"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

func TestDiskUsage(t *testing.T) {
	disks := []DiskUsage{
		{Node: "node-1", Disk: "disk-1", Persisted: 400 * gi, Limit: 400 * gi},
		{Node: "node-2", Disk: "disk-1", Persisted: 700 * gi, Limit: 400 * gi},
		{Node: "node-3", Disk: "disk-1", Persisted: 0, Limit: 400 * gi},
		{Node: "node-4", Disk: "disk-1", Persisted: 500 * gi, Limit: 400 * gi},
	}
	if got := disks[1].Percent(); got != 175 {
		t.Errorf("Percent() = %v, want 175", got)
	}
	if got := (DiskUsage{Persisted: gi}).Percent(); got != 0 {
		t.Errorf("Percent() without a limit = %v, want 0", got)
	}
	if disks[0].Over() || !disks[1].Over() {
		t.Errorf("Over(): a full disk is not over, one at 175%% is")
	}
	if got, ok := Fullest(disks); !ok || got.Node != "node-2" {
		t.Errorf("Fullest() = %+v, %v; want node-2", got, ok)
	}
	if _, ok := Fullest(nil); ok {
		t.Errorf("Fullest(nil) found a disk")
	}
	if got := OverLimit(disks); got != 2 {
		t.Errorf("OverLimit() = %d, want 2", got)
	}
}

func TestDecided(t *testing.T) {
	volume := func(status lhv1.ConditionStatus, reason, message string) *lhv1.Volume {
		v := &lhv1.Volume{}
		if status != "" {
			v.Status.Conditions = []lhv1.Condition{{Type: lhv1.VolumeConditionTypeScheduled, Status: status, Reason: reason, Message: message}}
		}
		return v
	}
	failure := lhv1.VolumeConditionReasonReplicaSchedulingFailure
	for _, tt := range []struct {
		name                 string
		v                    *lhv1.Volume
		scheduled, isDecided bool
	}{
		{"no condition yet", volume("", "", ""), false, false},
		{"scheduled", volume(lhv1.ConditionStatusTrue, "", ""), true, true},
		{"no disk with room", volume(lhv1.ConditionStatusFalse, failure,
			"placed 0 of 1 new replicas of volume pvc-1: node-1/disk-1: insufficient storage"), false, true},
		{"a write the gate refused", volume(lhv1.ConditionStatusFalse, failure,
			"replica pvc-1-r-0: scheduling it to node node-1 disk disk-1 (uuid) was refused: admission webhook denied the request"), false, false},
		{"a write that lost a race", volume(lhv1.ConditionStatusFalse, failure,
			"failed to schedule volume pvc-1: 0 of 1 replicas scheduled"), false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			scheduled, isDecided := decided(tt.v)
			if scheduled != tt.scheduled || isDecided != tt.isDecided {
				t.Errorf("decided() = %v, %v; want %v, %v", scheduled, isDecided, tt.scheduled, tt.isDecided)
			}
		})
	}
}
