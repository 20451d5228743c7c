// Package conditions finds a condition by its type in the condition list of
// a Longhorn object (a Node's, a disk's, a Volume's) and of a
// PersistentVolumeClaim: the one lookup every package reads them with.
package conditions

import (
	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
)

// Longhorn returns the condition of type typ in conds, a Longhorn object's
// condition list, and false when the list has none of that type.
func Longhorn(conds []lhv1.Condition, typ string) (lhv1.Condition, bool) {
	for _, c := range conds {
		if c.Type == typ {
			return c, true
		}
	}
	return lhv1.Condition{}, false
}

// LonghornTrue reports whether the condition of type typ in conds, a
// Longhorn object's condition list, is True; a missing one is not.
func LonghornTrue(conds []lhv1.Condition, typ string) bool {
	c, ok := Longhorn(conds, typ)
	return ok && c.Status == lhv1.ConditionStatusTrue
}

// Claim returns pvc's condition of type typ, pointing into its status so a
// writer can change it in place, or nil when it has none.
func Claim(pvc *corev1.PersistentVolumeClaim, typ corev1.PersistentVolumeClaimConditionType) *corev1.PersistentVolumeClaimCondition {
	for i := range pvc.Status.Conditions {
		if pvc.Status.Conditions[i].Type == typ {
			return &pvc.Status.Conditions[i]
		}
	}
	return nil
}
