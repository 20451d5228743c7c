package schedulerplugin

import (
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestMayHost: the nodes among which the restart rule applies are those
// kube-scheduler's node-level filters leave: not cordoned, no untolerated
// NoSchedule or NoExecute taint, the pod's node selector met.
func TestMayHost(t *testing.T) {
	plain := &corev1.Pod{}
	tolerant := &corev1.Pod{Spec: corev1.PodSpec{Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}}}
	selective := &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: map[string]string{"zone": "a"}}}
	node := func(unschedulable bool, taints []corev1.Taint, labels map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: labels},
			Spec: corev1.NodeSpec{Unschedulable: unschedulable, Taints: taints}}
	}
	noSchedule := []corev1.Taint{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}}
	preferNo := []corev1.Taint{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectPreferNoSchedule}}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		node *corev1.Node
		want bool
	}{
		{"an open node", plain, node(false, nil, nil), true},
		{"a cordoned node", plain, node(true, nil, nil), false},
		{"a cordoned node, tolerated", tolerant, node(true, nil, nil), true},
		{"a NoSchedule taint", plain, node(false, noSchedule, nil), false},
		{"a NoSchedule taint, tolerated", tolerant, node(false, noSchedule, nil), true},
		{"a PreferNoSchedule taint", plain, node(false, preferNo, nil), true},
		{"the node selector met", selective, node(false, nil, map[string]string{"zone": "a"}), true},
		{"the node selector not met", selective, node(false, nil, map[string]string{"zone": "b"}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mayHost(logr.Discard(), tc.pod, tc.node); got != tc.want {
				t.Errorf("mayHost = %v, want %v", got, tc.want)
			}
		})
	}
}
