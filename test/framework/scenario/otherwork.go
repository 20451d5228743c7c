package scenario

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// OtherWork is work of other applications that some nodes already run when
// a scenario begins, as the nodes of a real cluster do: on each busy node
// one pod of another app, with no volume, placed on the node directly, that
// requests Share of the node's allocatable CPU and memory. kube-scheduler's
// default scoring (NodeResourcesFit's least-allocated and
// NodeResourcesBalancedAllocation, against PodTopologySpread's default
// spreading) then prefers the other nodes for new pods.
type OtherWork struct {
	// Nodes names the busy nodes.
	Nodes []string
	// Share is the share of a busy node's allocatable CPU and memory its
	// other pod requests, above 0 and at most 1.
	Share float64
}

// DefaultOtherWorkShare is the share of a busy node's CPU and memory
// UnevenWork's other pods request.
const DefaultOtherWorkShare = 0.75

// UnevenWork returns the race's default other work: every other node of
// nodes in name order busy at DefaultOtherWorkShare, so node-1 and node-3
// of the race's topology, one node in each zone, so that spreading over
// zones does not even it out.
func UnevenWork(nodes []string) OtherWork {
	sorted := append([]string(nil), nodes...)
	sort.Strings(sorted)
	w := OtherWork{Share: DefaultOtherWorkShare}
	for i := 0; i < len(sorted); i += 2 {
		w.Nodes = append(w.Nodes, sorted[i])
	}
	return w
}

// otherWorkLabel labels the other app's pods; the scenarios' own pods are
// app=web, so topology spreading does not count these.
const otherWorkLabel = "other"

// start creates the other pods in namespace and waits until they run; it
// returns what each requests, by node.
func (w OtherWork) start(ctx context.Context, c client.WithWatch, o Common) (map[string]corev1.ResourceList, error) {
	if len(w.Nodes) == 0 {
		return nil, nil
	}
	if w.Share <= 0 || w.Share > 1 {
		return nil, fmt.Errorf("other work: share %v is not in (0, 1]", w.Share)
	}
	if err := ensureNamespace(ctx, c, o.Namespace); err != nil {
		return nil, err
	}
	requests := map[string]corev1.ResourceList{}
	var objs []client.Object
	for _, name := range w.Nodes {
		node := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
			return nil, fmt.Errorf("other work: getting node %s: %w", name, err)
		}
		cpu, mem := node.Status.Allocatable[corev1.ResourceCPU], node.Status.Allocatable[corev1.ResourceMemory]
		req := corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewMilliQuantity(int64(math.Floor(float64(cpu.MilliValue())*w.Share)), resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(int64(math.Floor(float64(mem.Value())*w.Share)), resource.BinarySI),
		}
		requests[name] = req
		objs = append(objs, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: otherWorkLabel + "-" + name, Namespace: o.Namespace, Labels: map[string]string{"app": otherWorkLabel}},
			Spec: corev1.PodSpec{
				NodeName: name,
				Containers: []corev1.Container{{
					Name: "app", Image: "busybox", Command: []string{"sleep", "infinity"},
					Resources: corev1.ResourceRequirements{Requests: req},
				}},
				TerminationGracePeriodSeconds: ptr.To[int64](0),
			},
		})
	}
	if err := createAll(ctx, c, objs); err != nil {
		return nil, fmt.Errorf("other work: %w", err)
	}
	var waiting []string
	err := waitFor(ctx, o.Timeout, c, &corev1.PodList{}, o.Namespace, func(pods objects) bool {
		waiting = waiting[:0]
		for _, obj := range objs {
			pod, ok := pods[o.Namespace+"/"+obj.GetName()].(*corev1.Pod)
			if !ok || pod.Status.Phase != corev1.PodRunning {
				waiting = append(waiting, obj.GetName())
			}
		}
		return len(waiting) == 0
	})
	if err != nil {
		return nil, fmt.Errorf("other work: waiting until %s run: %w", strings.Join(waiting, ", "), err)
	}
	o.Logf("other work: %s", DescribeRequests(requests))
	return requests, nil
}

// DescribeRequests formats the other pods' requests by node, "48 CPUs and
// 192Gi of memory on node-1 and 48 CPUs and 192Gi of memory on node-3".
func DescribeRequests(requests map[string]corev1.ResourceList) string {
	nodes := make([]string, 0, len(requests))
	for n := range requests {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	parts := make([]string, 0, len(nodes))
	for _, n := range nodes {
		cpu, mem := requests[n][corev1.ResourceCPU], requests[n][corev1.ResourceMemory]
		parts = append(parts, fmt.Sprintf("%s CPUs and %s of memory on %s", cpu.String(), mem.String(), n))
	}
	return strings.Join(parts, " and ")
}
