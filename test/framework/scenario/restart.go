package scenario

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RestartOptions configures Restart.
type RestartOptions struct {
	Common
	// Pods is how many pods there are; zero is 16.
	Pods int
	// Size is each pod's volume size; "" is 100Gi.
	Size string
	// UseExtender makes the pods request the extender's resource.
	UseExtender bool
}

// RestartResult is where the pods were before and after the restart.
type RestartResult struct {
	// Before is the first run of the pods, After the run of the recreated pods.
	Before, After Result
	// Moved names each pod that came back on another node: "web-3: node-1 → node-2".
	Moved []string
}

// Restart is the pod-restart test of the plan: a StatefulSet of Pods
// replicas, each with its own claim, is created as in Race; its volumes are
// set to be retained (reclaim policy Retain), the StatefulSet is deleted
// with its pods and, once they are gone, created again: its controller
// re-creates the pods with the same names on the claims it kept, and so
// the same volumes and replicas. A restarted pod should come back to the
// node that holds its data. The StatefulSet, its claims and their volumes
// are left for Cleanup.
func Restart(ctx context.Context, c client.WithWatch, opts RestartOptions) (RestartResult, error) {
	var out RestartResult
	o, err := opts.Common.withDefaults()
	if err != nil {
		return out, err
	}
	if opts.Pods == 0 {
		opts.Pods = 16
	}
	if opts.Size == "" {
		opts.Size = "100Gi"
	}
	w, err := newWorkload(c, o, opts.Pods, 1, opts.Size, opts.UseExtender)
	if err != nil {
		return out, err
	}
	w.sts = true
	if out.Before, err = w.run(ctx, w.createStatefulSet); err != nil {
		return out, fmt.Errorf("restart, first run: %w", err)
	}
	if !out.Before.OK() {
		return out, nil
	}
	if err := w.retainVolumes(ctx); err != nil {
		return out, fmt.Errorf("restart: %w", err)
	}
	if err := w.deleteStatefulSet(ctx); err != nil {
		return out, fmt.Errorf("restart: %w", err)
	}
	o.Logf("creating StatefulSet %s again on the claims it kept", statefulSetName)
	if out.After, err = w.run(ctx, w.createStatefulSet); err != nil {
		return out, fmt.Errorf("restart, second run: %w", err)
	}
	for _, pod := range w.names {
		before, after := out.Before.PodNodes[pod], out.After.PodNodes[pod]
		if before != after {
			out.Moved = append(out.Moved, fmt.Sprintf("%s: %s → %s", pod, before, after))
		}
	}
	return out, nil
}
