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
}

// Race is the race-condition test of the plan: Pods pods, each with its own
// claim of Size, are created at the same moment, as a StatefulSet with
// parallel pod management does. On four nodes with one 400Gi disk each,
// sixteen 100Gi volumes fill the cluster exactly, so the only placement
// that gives every pod its data locally is four pods per node. The claims
// are bound before the pods are created, so the times measure scheduling,
// not provisioning. The pods and claims are left for Cleanup.
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
	if err := w.createClaims(ctx); err != nil {
		return Result{}, err
	}
	res, err := w.run(ctx)
	if err != nil {
		return res, fmt.Errorf("race: %w", err)
	}
	return res, nil
}
