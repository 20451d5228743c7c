package scenario

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// evictionRetry is how long a drain waits before it asks again to evict a
// pod whose eviction a PodDisruptionBudget refused: kubectl drain's
// EvictErrorRetryDelay (k8s.io/kubectl v0.36.3 pkg/cmd/drain/drain.go,
// line 155).
const evictionRetry = 5 * time.Second

// nodeDrain is a drain under way: the evictions of the pods of one node
// and the wait until they are gone, as kubectl drain runs them.
type nodeDrain struct {
	node  string
	start time.Time
	// cancel stops the evictions and the wait; done is closed once every
	// eviction and the wait ended.
	cancel context.CancelFunc
	done   chan struct{}

	mu sync.Mutex
	// left are the evicted pods (namespace/name) not gone yet, each with
	// what holds it: the API server's last refusal of its eviction, or
	// that it is terminating.
	left map[string]string
	// finished is when the last of them was gone; zero until then.
	finished time.Time
	errs     []error
}

// drainNode drains node as kubectl drain --ignore-daemonsets does
// (k8s.io/kubectl v0.36.3 pkg/drain/drain.go, Helper.evictPods): it
// cordons node (uncordoning every other one of nodes) and evicts every pod
// on it through the eviction API at once, each in its own goroutine that
// asks again every evictionRetry while a PodDisruptionBudget refuses it,
// and waits until each evicted pod is gone. It refuses, as kubectl drain
// without --force does, a pod that no controller would re-create. The
// workload's evicted pods are its stale ones from then on.
//
// It returns once the workload's own pods are gone (the StatefulSet
// controller re-creates them meanwhile), with the drain still going on for
// the other pods of the node, such as Longhorn's instance manager, whose
// PodDisruptionBudget Longhorn keeps while the node holds the last healthy
// replica of a volume; nodeDrain.wait waits for them.
func (w *workload) drainNode(ctx context.Context, nodes []string, node string) (*nodeDrain, error) {
	start := time.Now()
	if err := setCordoned(ctx, w.c, w.o, nodes, node); err != nil {
		return nil, fmt.Errorf("cordoning node %s: %w", node, err)
	}
	pods, err := podsToEvict(ctx, w.c, node)
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithCancel(ctx)
	d := &nodeDrain{node: node, start: start, cancel: cancel, done: make(chan struct{}), left: map[string]string{}}
	w.stale = map[types.UID]bool{}
	uids := map[string]types.UID{}
	for _, pod := range pods {
		uids[key(pod)] = pod.UID
		d.left[key(pod)] = "eviction not asked yet"
		if pod.Namespace == w.o.Namespace {
			w.stale[pod.UID] = true
		}
	}
	var wg sync.WaitGroup
	for _, pod := range pods {
		wg.Go(func() { d.evict(dctx, w.c, pod) })
	}
	wg.Go(func() { d.waitGone(dctx, w.c, uids) })
	go func() {
		wg.Wait()
		close(d.done)
	}()
	w.o.Logf("cordoned node %s and evicting its %d pods; waiting until the workload's are gone", node, len(pods))
	if err := w.waitPodsGone(ctx, w.stale); err != nil {
		d.stop()
		return nil, errors.Join(fmt.Errorf("draining node %s: %w", node, err), d.err())
	}
	return d, nil
}

// evict asks the API server to evict pod until it does or the pod is gone,
// again every evictionRetry while a PodDisruptionBudget refuses it (429),
// until ctx ends, as kubectl drain does.
func (d *nodeDrain) evict(ctx context.Context, c client.Client, pod *corev1.Pod) {
	eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}
	for {
		err := c.SubResource("eviction").Create(ctx, pod, eviction)
		switch {
		case err == nil:
			d.note(key(pod), "evicted, terminating")
			return
		case apierrors.IsNotFound(err):
			return
		case apierrors.IsTooManyRequests(err):
			d.note(key(pod), "eviction refused: "+err.Error())
		case ctx.Err() != nil:
			return
		default:
			d.fail(fmt.Errorf("evicting pod %s/%s: %w", pod.Namespace, pod.Name, err))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(evictionRetry):
		}
	}
}

// waitGone watches the pods until every one of uids (by namespace/name) is
// gone, or replaced by a pod of another UID, or ctx ends.
func (d *nodeDrain) waitGone(ctx context.Context, c client.WithWatch, uids map[string]types.UID) {
	err := observe(ctx, c, &corev1.PodList{}, "", func(objs objects) bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		for k, uid := range uids {
			if obj, ok := objs[k]; !ok || obj.GetUID() != uid {
				delete(d.left, k)
			}
		}
		if len(d.left) == 0 {
			d.finished = time.Now()
			return true
		}
		return false
	})
	if err != nil && ctx.Err() == nil {
		d.fail(fmt.Errorf("watching the pods of node %s: %w", d.node, err))
	}
}

// note records what holds pod k, unless it is gone.
func (d *nodeDrain) note(k, why string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.left[k]; ok {
		d.left[k] = why
	}
}

func (d *nodeDrain) fail(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.errs = append(d.errs, err)
}

func (d *nodeDrain) err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return errors.Join(d.errs...)
}

// stop ends the evictions and the wait, and returns once they ended.
func (d *nodeDrain) stop() {
	d.cancel()
	<-d.done
}

// wait waits up to timeout for the drain to end: every pod it evicted
// gone. It then stops the drain and returns how long it took from its
// start (0 when it did not end), and the pods it left, each with what held
// it (as "namespace/name: why"), sorted.
func (d *nodeDrain) wait(ctx context.Context, timeout time.Duration) (took time.Duration, left []string, err error) {
	select {
	case <-d.done:
	case <-time.After(timeout):
	case <-ctx.Done():
	}
	d.stop()
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.finished.IsZero() {
		took = d.finished.Sub(d.start)
	}
	for k, why := range d.left {
		left = append(left, k+": "+why)
	}
	sort.Strings(left)
	return took, left, errors.Join(d.errs...)
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
