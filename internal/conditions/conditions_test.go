package conditions

import (
	"testing"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
)

func TestLonghorn(t *testing.T) {
	conds := []lhv1.Condition{
		{Type: lhv1.NodeConditionTypeReady, Status: lhv1.ConditionStatusTrue},
		{Type: lhv1.NodeConditionTypeSchedulable, Status: lhv1.ConditionStatusFalse, Reason: "KubernetesNodeCordoned"},
	}
	for _, tc := range []struct {
		typ        string
		found, tru bool
		reason     string
	}{
		{typ: lhv1.NodeConditionTypeReady, found: true, tru: true},
		{typ: lhv1.NodeConditionTypeSchedulable, found: true, reason: "KubernetesNodeCordoned"},
		{typ: lhv1.NodeConditionTypeMountPropagation},
	} {
		c, ok := Longhorn(conds, tc.typ)
		if ok != tc.found || c.Reason != tc.reason || (ok && c.Type != tc.typ) {
			t.Errorf("Longhorn(%s) = %+v, %v; want found %v with reason %q", tc.typ, c, ok, tc.found, tc.reason)
		}
		if got := LonghornTrue(conds, tc.typ); got != tc.tru {
			t.Errorf("LonghornTrue(%s) = %v, want %v", tc.typ, got, tc.tru)
		}
	}
	if LonghornTrue(nil, lhv1.NodeConditionTypeReady) {
		t.Error("a missing condition is True")
	}
}

func TestClaim(t *testing.T) {
	pvc := &corev1.PersistentVolumeClaim{Status: corev1.PersistentVolumeClaimStatus{Conditions: []corev1.PersistentVolumeClaimCondition{
		{Type: corev1.PersistentVolumeClaimResizing, Status: corev1.ConditionTrue},
		{Type: corev1.PersistentVolumeClaimControllerResizeError, Status: corev1.ConditionTrue, Message: "no room"},
	}}}
	c := Claim(pvc, corev1.PersistentVolumeClaimControllerResizeError)
	if c == nil || c.Message != "no room" {
		t.Fatalf("Claim(ControllerResizeError) = %+v", c)
	}
	c.Status = corev1.ConditionFalse
	if pvc.Status.Conditions[1].Status != corev1.ConditionFalse {
		t.Error("the condition returned is not the claim's own")
	}
	if c := Claim(pvc, corev1.PersistentVolumeClaimFileSystemResizePending); c != nil {
		t.Errorf("Claim(FileSystemResizePending) = %+v, want none", c)
	}
}
