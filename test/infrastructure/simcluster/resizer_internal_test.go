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

// The codes of ControllerExpandVolume the external resizer takes as
// infeasible: InvalidArgument, OutOfRange and NotFound, not Internal or
// the others it retries.
func TestResizeInfeasible(t *testing.T) {
	for code, infeasible := range map[codes.Code]bool{
		codes.InvalidArgument: true, codes.OutOfRange: true, codes.NotFound: true,
		codes.Internal: false, codes.FailedPrecondition: false, codes.DeadlineExceeded: false, codes.Unavailable: false,
	} {
		if got := resizeInfeasible(status.Error(code, "refused")); got != infeasible {
			t.Errorf("%s: infeasible %v, want %v", code, got, infeasible)
		}
	}
	if resizeInfeasible(errors.New("not a gRPC status")) {
		t.Error("an error that is no gRPC status is infeasible")
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
