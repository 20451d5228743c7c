package simcluster

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ControllerExpandVolume's answer to a failed volume update, and whether
// the external resizer takes it as infeasible.
func TestControllerExpandError(t *testing.T) {
	for _, tc := range []struct {
		err        string
		code       codes.Code
		infeasible bool
	}{
		// Longhorn's own capacity refusals (CheckReplicasSizeExpansion,
		// wrapped by its volume manager): retried.
		{"unable to expand volume v: error while CheckReplicasSizeExpansion for volume v: cannot schedule 10737418240 more bytes to disk 3a2b with &{...}; Scheduling space condition failed: ...", codes.Internal, false},
		{"unable to expand volume v: error while CheckReplicasSizeExpansion for volume v: disk 3a2b does not have sufficient physical space for expansion: physical free space would drop below minimal: ...", codes.Internal, false},
		// The gate's refusal of a growth the disk can never hold, behind the
		// API server's webhook denial and Longhorn's volume manager.
		{`unable to expand volume v: admission webhook "volumes.gate.diskschedule.longhorn.io" denied the request: diskschedule-gate: failed to schedule 5 more bytes to disk d: volume v grows from 10Gi to 20Gi, but ...`, codes.OutOfRange, true},
		// Not about room: retried.
		{"admission webhook denied the request: simulated gate: no room to expand", codes.Internal, false},
		{"diskschedule-gate: volume v grows from 10Gi to 20Gi: the ledger gave no decision in time; retry", codes.Internal, false},
		{"failed to schedule the replica", codes.Internal, false},
	} {
		got := ControllerExpandError(errors.New(tc.err))
		if status.Code(got) != tc.code || status.Convert(got).Message() != tc.err {
			t.Errorf("%q is answered %v, want %s with the error's message", tc.err, got, tc.code)
		}
		if resizeInfeasible(got) != tc.infeasible {
			t.Errorf("%q: infeasible %v, want %v", tc.err, !tc.infeasible, tc.infeasible)
		}
	}
}

// A claim marked infeasible waits for InfeasibleRetry from its
// ControllerResizeError condition for the size it was refused, not for
// another.
func TestInfeasibleWait(t *testing.T) {
	now := time.Now()
	claim := func(st corev1.ClaimResourceStatus, allocated string, since time.Duration) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{Status: corev1.PersistentVolumeClaimStatus{
			AllocatedResourceStatuses: map[corev1.ResourceName]corev1.ClaimResourceStatus{corev1.ResourceStorage: st},
			AllocatedResources:        corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(allocated)},
			Conditions: []corev1.PersistentVolumeClaimCondition{{Type: corev1.PersistentVolumeClaimControllerResizeError,
				Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-since))}},
		}}
	}
	for _, tc := range []struct {
		name string
		pvc  *corev1.PersistentVolumeClaim
		want string
		wait time.Duration
	}{
		{"the refused size", claim(corev1.PersistentVolumeClaimControllerResizeInfeasible, "2Ti", time.Minute), "2Ti", InfeasibleRetry - time.Minute},
		{"the refused size, slow retry due", claim(corev1.PersistentVolumeClaimControllerResizeInfeasible, "2Ti", InfeasibleRetry+time.Second), "2Ti", -time.Second},
		{"a lowered request", claim(corev1.PersistentVolumeClaimControllerResizeInfeasible, "2Ti", time.Minute), "20Gi", 0},
		{"in progress", claim(corev1.PersistentVolumeClaimControllerResizeInProgress, "2Ti", time.Minute), "2Ti", 0},
	} {
		if got := infeasibleWait(tc.pvc, resource.MustParse(tc.want), now); got > 0 != (tc.wait > 0) || (tc.wait > 0 && got != tc.wait) {
			t.Errorf("%s: wait %s, want %s", tc.name, got, tc.wait)
		}
	}
}
