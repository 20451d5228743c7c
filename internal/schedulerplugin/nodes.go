package schedulerplugin

import (
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// mayHost reports whether pod may go to node as far as the node itself
// says: it is not cordoned (unless the pod tolerates that), has no
// NoSchedule or NoExecute taint the pod does not tolerate, and meets the
// pod's node selector and required node affinity. kube-scheduler's
// NodeUnschedulable, TaintToleration and NodeAffinity filters decide this
// before an extender is called, so the extender applies its restart rule
// (a pod goes only to the node holding a replica of each of its volumes)
// among such nodes; PreFilter, which runs before any filter, applies it
// among the same. So a drained node keeps no pod of its volumes: the pod
// goes where its volumes fit.
func mayHost(logger logr.Logger, pod *corev1.Pod, node *corev1.Node) bool {
	cordon := &corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}
	if node.Spec.Unschedulable && !corev1helpers.TolerationsTolerateTaint(logger, pod.Spec.Tolerations, cordon, false) {
		return false
	}
	if _, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logger, node.Spec.Taints, pod.Spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, false); untolerated {
		return false
	}
	ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node)
	return err == nil && ok
}
