package scenario

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MultiPVCOptions configures MultiPVC.
type MultiPVCOptions struct {
	Common
	// Claims is how many claims each pod has; zero is 4.
	Claims int
	// Pods is how many such pods are created at once; zero is 1.
	Pods int
	// Size is each claim's size; "" is 100Gi.
	Size string
	// UseExtender makes the pod request the extender's resource.
	UseExtender bool
}

// MultiPVCResult is what happened to the pod with several claims.
type MultiPVCResult struct {
	Result
	// Node is the node the first pod (web-0) went to, "" if none.
	Node string
}

// MultiPVC is the multiple-claims test of the plan: one pod (web-0) with
// Claims claims of Size each. On nodes with 1, 2, 3 and 4 disks of 100Gi,
// four 100Gi volumes fit together on the 4-disk node only: kube-scheduler
// alone checks each claim by itself and sees a node as one pool. With Pods,
// that many such pods race for the nodes at once. The pods and their claims
// are left for Cleanup.
func MultiPVC(ctx context.Context, c client.WithWatch, opts MultiPVCOptions) (MultiPVCResult, error) {
	o, err := opts.Common.withDefaults()
	if err != nil {
		return MultiPVCResult{}, err
	}
	if opts.Claims == 0 {
		opts.Claims = 4
	}
	if opts.Size == "" {
		opts.Size = "100Gi"
	}
	if opts.Pods == 0 {
		opts.Pods = 1
	}
	w, err := newWorkload(c, o, opts.Pods, opts.Claims, opts.Size, opts.UseExtender)
	if err != nil {
		return MultiPVCResult{}, err
	}
	if err := w.createClaims(ctx); err != nil {
		return MultiPVCResult{}, err
	}
	res, err := w.run(ctx, w.createPods)
	out := MultiPVCResult{Result: res, Node: res.PodNodes[w.names[0]]}
	if err != nil {
		return out, fmt.Errorf("multi-PVC: %w", err)
	}
	return out, nil
}
