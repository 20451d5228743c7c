package scenario

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// evictionRetry is how long a drain waits before it asks again to evict a
// pod whose eviction a PodDisruptionBudget refused, as kubectl drain does.
const evictionRetry = time.Second

// drainNode drains node as kubectl drain --ignore-daemonsets does: it
// cordons node (uncordoning every other one of nodes), evicts every pod on
// it through the eviction API, and waits until those pods are gone. It
// refuses, as kubectl drain without --force does, a pod that no controller
// would re-create. The evicted pods are the workload's stale ones from then
// on. It returns when the drain began.
func (w *workload) drainNode(ctx context.Context, nodes []string, node string) (time.Time, error) {
	start := time.Now()
	if err := setCordoned(ctx, w.c, w.o, nodes, node); err != nil {
		return start, fmt.Errorf("cordoning node %s: %w", node, err)
	}
	pods, err := podsToEvict(ctx, w.c, node)
	if err != nil {
		return start, err
	}
	w.stale = map[types.UID]bool{}
	for _, pod := range pods {
		if err := evict(ctx, w.c, pod, w.o.Timeout); err != nil {
			return start, err
		}
		w.stale[pod.UID] = true
	}
	w.o.Logf("cordoned node %s and evicted its %d pods; waiting until they are gone", node, len(pods))
	if err := w.waitPodsGone(ctx, w.stale); err != nil {
		return start, fmt.Errorf("draining node %s: %w", node, err)
	}
	return start, nil
}

// podsToEvict returns the pods on node that a drain evicts: every one but
// the DaemonSets' and mirror pods, and those already terminating. It fails
// on a pod with no controller, which an eviction would lose.
func podsToEvict(ctx context.Context, c client.Client, node string) ([]*corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := c.List(ctx, list, client.MatchingFields{"spec.nodeName": node}); err != nil {
		return nil, fmt.Errorf("listing the pods on node %s: %w", node, err)
	}
	var out []*corev1.Pod
	for i := range list.Items {
		pod := &list.Items[i]
		owner := metav1.GetControllerOf(pod)
		_, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]
		switch {
		case !pod.DeletionTimestamp.IsZero(), mirror, owner != nil && owner.Kind == "DaemonSet":
			continue
		case owner == nil:
			return nil, fmt.Errorf("draining node %s: pod %s/%s has no controller to re-create it", node, pod.Namespace, pod.Name)
		}
		out = append(out, pod)
	}
	return out, nil
}

// evict asks the API server to evict pod, again while a
// PodDisruptionBudget refuses it (429), until timeout passes. A pod already
// gone counts as evicted.
func evict(ctx context.Context, c client.Client, pod *corev1.Pod, timeout time.Duration) error {
	eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}
	var last error
	err := wait.PollUntilContextTimeout(ctx, evictionRetry, timeout, true, func(ctx context.Context) (bool, error) {
		last = c.SubResource("eviction").Create(ctx, pod, eviction)
		switch {
		case last == nil, apierrors.IsNotFound(last):
			return true, nil
		case apierrors.IsTooManyRequests(last):
			return false, nil
		}
		return false, last
	})
	if err != nil {
		return fmt.Errorf("evicting pod %s/%s (last answer: %v): %w", pod.Namespace, pod.Name, last, err)
	}
	return nil
}
