package scenario

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Opt-in by namespace (DESIGN §6.1): the label that sends a namespace's
// pods with a Longhorn claim to the extender, and the second scheduler's
// name the pod webhook sets.
const (
	OptInLabel         = "diskschedule.longhorn.io/extender"
	SecondaryScheduler = "diskschedule-scheduler"
)

// OptInRaceResult is the race run with pods written without the
// extender's resource in a namespace labelled for opt-in.
type OptInRaceResult struct {
	Result
	// OptedIn counts the race's pods that the pod webhook gave the
	// extender's resource and the second scheduler.
	OptedIn int
	// NotOptedIn names the race's pods it did not, with what they had.
	NotOptedIn []string
}

// OptInRace is Race with its StatefulSet written without the extender's
// resource (opts.UseExtender must be false) in o.Namespace labelled
// diskschedule.longhorn.io/extender=enabled: the pod opt-in webhook adds
// the resource and sets the second scheduler, whose diskschedule plugin
// places the pods. It reports what each pod was given besides where
// they went. The namespace is labelled when it exists already.
func OptInRace(ctx context.Context, c client.WithWatch, opts RaceOptions) (OptInRaceResult, error) {
	if opts.UseExtender {
		return OptInRaceResult{}, fmt.Errorf("opt-in race: the StatefulSet is written without the extender's resource; UseExtender must be false")
	}
	if opts.Namespace == "" {
		return OptInRaceResult{}, fmt.Errorf("opt-in race: a scenario needs a namespace")
	}
	if err := labelNamespace(ctx, c, opts.Namespace, map[string]string{OptInLabel: "enabled"}); err != nil {
		return OptInRaceResult{}, fmt.Errorf("opt-in race: %w", err)
	}
	res, err := Race(ctx, c, opts)
	out := OptInRaceResult{Result: res}
	if err != nil {
		return out, err
	}
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(opts.Namespace), client.MatchingLabels{"app": statefulSetName}); err != nil {
		return out, fmt.Errorf("opt-in race: listing the pods: %w", err)
	}
	for i := range pods.Items {
		if why := optedIn(&pods.Items[i]); why != "" {
			out.NotOptedIn = append(out.NotOptedIn, pods.Items[i].Name+": "+why)
		} else {
			out.OptedIn++
		}
	}
	opts.Common.Logf("%d of %d pods written without %s got it and scheduler %s from the pod webhook",
		out.OptedIn, len(pods.Items), ExtendedResource, SecondaryScheduler)
	return out, nil
}

// optedIn says what a pod lacks of the opt-in (the resource in its first
// container's requests and limits, the second scheduler), or "".
func optedIn(pod *corev1.Pod) string {
	if len(pod.Spec.Containers) == 0 {
		return "no container"
	}
	r := pod.Spec.Containers[0].Resources
	req, lim := r.Requests[ExtendedResource], r.Limits[ExtendedResource]
	if req.Value() != 1 || lim.Value() != 1 {
		return fmt.Sprintf("requests %v, limits %v", r.Requests, r.Limits)
	}
	if pod.Spec.SchedulerName != SecondaryScheduler {
		return "scheduler " + pod.Spec.SchedulerName
	}
	return ""
}

// UnlabelledPod creates, in o.Namespace (not labelled for opt-in), a claim
// of o.StorageClass (DefaultWaitForFirstConsumerClass when empty, so that
// it is provisioned only for a pod on a node) and a pod mounting it, written without the extender's
// resource, and returns the pod as the API server stored it and what it
// was given ("" when it is as written). The pod selects no node (a node
// selector no node has), so its claim is never provisioned and nothing of
// the cluster's space is taken; Cleanup removes both.
func UnlabelledPod(ctx context.Context, c client.Client, o Common) (*corev1.Pod, string, error) {
	if o.StorageClass == "" {
		o.StorageClass = DefaultWaitForFirstConsumerClass
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, "", err
	}
	if err := ensureNamespace(ctx, c, o.Namespace); err != nil {
		return nil, "", err
	}
	w, err := newWorkload(nil, o, 1, 1, "1Gi", false)
	if err != nil {
		return nil, "", err
	}
	pod := w.pod(w.names[0])
	pod.Spec.NodeSelector = map[string]string{"diskschedule.longhorn.io/no-such-node": "true"}
	claim := w.claim(w.pods[pod.Name][0])
	for _, obj := range []client.Object{claim, pod} {
		if err := c.Create(ctx, obj); err != nil {
			return nil, "", fmt.Errorf("creating %s %s/%s: %w", kind(obj), obj.GetNamespace(), obj.GetName(), err)
		}
	}
	r := pod.Spec.Containers[0].Resources
	var given []string
	if _, ok := r.Requests[ExtendedResource]; ok {
		given = append(given, fmt.Sprintf("requests %v", r.Requests))
	}
	if _, ok := r.Limits[ExtendedResource]; ok {
		given = append(given, fmt.Sprintf("limits %v", r.Limits))
	}
	if pod.Spec.SchedulerName != corev1.DefaultSchedulerName {
		given = append(given, "scheduler "+pod.Spec.SchedulerName)
	}
	o.Logf("created pod %s with a claim of %s in namespace %s, not labelled %s: given %v", pod.Name, o.StorageClass, o.Namespace, OptInLabel, given)
	if len(given) == 0 {
		return pod, "", nil
	}
	return pod, fmt.Sprint(given), nil
}

// labelNamespace creates the namespace with labels, or adds them to it.
func labelNamespace(ctx context.Context, c client.Client, name string, labels map[string]string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	err := c.Create(ctx, ns)
	if !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("creating namespace %s: %w", name, err)
		}
		return nil
	}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		return fmt.Errorf("reading namespace %s: %w", name, err)
	}
	patch := client.MergeFrom(ns.DeepCopy())
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	for k, v := range labels {
		ns.Labels[k] = v
	}
	if err := c.Patch(ctx, ns, patch); err != nil {
		return fmt.Errorf("labelling namespace %s: %w", name, err)
	}
	return nil
}
