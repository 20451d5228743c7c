package scenario

import (
	"context"
	"errors"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DrainOptions configures Drain.
type DrainOptions struct {
	Common
	// Pods is how many pods there are; zero is 4.
	Pods int
	// Size is each pod's volume size; "" is 100Gi.
	Size string
	// Node is the node the pods start on and that is drained; "" is the
	// first node, by name, with the most disk space.
	Node string
	// UseExtender makes the pods request the extender's resource.
	UseExtender bool
}

// DrainResult is where the pods were before and after the drain.
type DrainResult struct {
	// Node is the drained node.
	Node string
	// Before is the pods' run on Node, After the run of the recreated pods.
	Before, After Result
}

// Drain is the node-drain test of the plan: with every node but Node
// cordoned, a StatefulSet of Pods replicas, each with its own claim, is
// created and its pods land on Node. Every node is uncordoned; then Node is
// drained as kubectl drain does it: cordoned, and its pods evicted through
// the eviction API (which honours PodDisruptionBudgets) and waited for until
// they are gone; the StatefulSet controller re-creates them with the same
// names and claims. On two nodes with a 400Gi disk and two with a 99Gi
// disk, four 100Gi volumes can follow their pods only to the other 400Gi
// node. After's times run from the drain's start. Every node is uncordoned
// again at the end; the StatefulSet and its claims are left for Cleanup.
func Drain(ctx context.Context, c client.WithWatch, opts DrainOptions) (out DrainResult, retErr error) {
	o, err := opts.Common.withDefaults()
	if err != nil {
		return out, err
	}
	if opts.Pods == 0 {
		opts.Pods = 4
	}
	if opts.Size == "" {
		opts.Size = "100Gi"
	}
	if opts.Node == "" {
		if opts.Node, err = largestNode(ctx, c, o.SystemNamespace); err != nil {
			return out, err
		}
	}
	out.Node = opts.Node
	nodes, err := longhornNodes(ctx, c, o.SystemNamespace)
	if err != nil {
		return out, err
	}
	var others []string
	for _, n := range nodes {
		if n != opts.Node {
			others = append(others, n)
		}
	}
	w, err := newWorkload(c, o, opts.Pods, 1, opts.Size, opts.UseExtender)
	if err != nil {
		return out, err
	}
	defer func() {
		if err := setCordoned(ctx, c, o, nodes); err != nil {
			retErr = errors.Join(retErr, fmt.Errorf("drain: uncordoning: %w", err))
		}
	}()

	if err := setCordoned(ctx, c, o, nodes, others...); err != nil {
		return out, fmt.Errorf("drain: %w", err)
	}
	w.sts = true
	if out.Before, err = w.run(ctx, w.createStatefulSet); err != nil {
		return out, fmt.Errorf("drain, first run: %w", err)
	}
	if !out.Before.OK() {
		return out, nil
	}
	if err := setCordoned(ctx, c, o, nodes); err != nil {
		return out, fmt.Errorf("drain: %w", err)
	}
	o.Logf("uncordoned every node; draining %s", opts.Node)
	drain := func(ctx context.Context) (time.Time, error) {
		return w.drainNode(ctx, nodes, opts.Node)
	}
	if out.After, err = w.run(ctx, drain); err != nil {
		return out, fmt.Errorf("drain, second run: %w", err)
	}
	return out, nil
}
