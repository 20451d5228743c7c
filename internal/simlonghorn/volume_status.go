package simlonghorn

import (
	"fmt"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// volumeStatus returns the status Longhorn's volume controller reports for
// v with its persisted replicas: the attachment state, robustness, whether
// an expansion is still required, and the Scheduled condition: False with
// the scheduler's reasons when a replica found no disk. (A sync whose
// replica write was refused writes no status at all, as Longhorn's.)
func volumeStatus(v *lhv1.Volume, replicas []lhv1.Replica, plan volumePlan, now time.Time) lhv1.VolumeStatus {
	st := *v.Status.DeepCopy()
	if st.CurrentImage == "" {
		st.CurrentImage = volumeImage(v)
	}
	want := wantedReplicas(v)
	scheduled, running, waiting := 0, 0, 0
	st.ExpansionRequired = false
	for i := range replicas {
		r := &replicas[i]
		if r.Spec.NodeID != "" {
			scheduled++
		} else if waitsForAttachment(v, r) {
			waiting++
		}
		if r.Status.CurrentState == lhv1.InstanceStateRunning && r.Spec.FailedAt == "" {
			running++
		}
		if r.Spec.VolumeSize < v.Spec.Size {
			st.ExpansionRequired = true
		}
	}

	switch {
	case v.Spec.NodeID == "":
		st.State, st.CurrentNodeID, st.Robustness = lhv1.VolumeStateDetached, "", lhv1.VolumeRobustnessUnknown
	case scheduled == 0:
		st.State, st.CurrentNodeID, st.Robustness = lhv1.VolumeStateAttaching, "", lhv1.VolumeRobustnessUnknown
	default:
		st.State, st.CurrentNodeID = lhv1.VolumeStateAttached, v.Spec.NodeID
		switch {
		case running >= want:
			st.Robustness = lhv1.VolumeRobustnessHealthy
		case running > 0:
			st.Robustness = lhv1.VolumeRobustnessDegraded
		default:
			st.Robustness = lhv1.VolumeRobustnessUnknown
		}
	}

	typ := lhv1.VolumeConditionTypeScheduled
	switch {
	case plan.failure != nil:
		st.Conditions = setCondition(st.Conditions, typ, lhv1.ConditionStatusFalse, plan.failure.reason, plan.failure.message, now)
	case scheduled+waiting < len(replicas) || len(replicas) < want:
		st.Conditions = setCondition(st.Conditions, typ, lhv1.ConditionStatusFalse, lhv1.VolumeConditionReasonReplicaSchedulingFailure,
			fmt.Sprintf("failed to schedule volume %v: %d of %d replicas scheduled", v.Name, scheduled, want), now)
	default:
		// Longhorn counts replicas waiting for the volume's attachment
		// (best-effort and strict-local data locality) as not failing.
		st.Conditions = setCondition(st.Conditions, typ, lhv1.ConditionStatusTrue, "", "", now)
	}
	return st
}

// waitsForAttachment reports whether an unscheduled replica of v waits for
// v to be attached before it is placed.
func waitsForAttachment(v *lhv1.Volume, r *lhv1.Replica) bool {
	return r.Spec.NodeID == "" && v.Spec.NodeID == "" &&
		(v.Spec.DataLocality == lhv1.DataLocalityBestEffort || v.Spec.DataLocality == lhv1.DataLocalityStrictLocal)
}
