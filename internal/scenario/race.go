package scenario

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RaceOptions configures Race.
type RaceOptions struct {
	Common
	// Pods is how many pods are created at once; zero is 16.
	Pods int
	// Size is each pod's volume size; "" is 100Gi.
	Size string
	// UseExtender makes the pods request the extender's resource.
	UseExtender bool
	// BarePods runs the race without the StatefulSet: the claims are
	// provisioned and bound first, then the pods are created at once by
	// themselves, so every pod is ready to schedule at the same moment and
	// the times are kube-scheduler's alone.
	BarePods bool
}

// Race is the race-condition test of the plan: a StatefulSet of Pods
// replicas with parallel pod management, each with its own claim of Size
// from the claim template, so kube-controller-manager creates every pod and
// claim at the same moment and its PV controller binds the claims to the
// volumes the provisioner creates. On four nodes with one 400Gi disk each,
// sixteen 100Gi volumes fill the cluster exactly, so the only placement
// that gives every pod its data locally is four pods per node. The times
// run from the StatefulSet's creation (with BarePods, from the pods'). The
// StatefulSet or the pods, and the claims, are left for Cleanup.
func Race(ctx context.Context, c client.WithWatch, opts RaceOptions) (Result, error) {
	o, err := opts.Common.withDefaults()
	if err != nil {
		return Result{}, err
	}
	if opts.Pods == 0 {
		opts.Pods = 16
	}
	if opts.Size == "" {
		opts.Size = "100Gi"
	}
	w, err := newWorkload(c, o, opts.Pods, 1, opts.Size, opts.UseExtender)
	if err != nil {
		return Result{}, err
	}
	begin := w.createStatefulSet
	if opts.BarePods {
		if err := w.createClaims(ctx); err != nil {
			return Result{}, fmt.Errorf("race: %w", err)
		}
		begin = w.createPods
	} else {
		w.sts = true
	}
	res, err := w.run(ctx, begin)
	if err != nil {
		return res, fmt.Errorf("race: %w", err)
	}
	return res, nil
}
