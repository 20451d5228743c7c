package scenario

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

// DrainResult is where the pods were before and after the drain, and
// whether the drain ended.
type DrainResult struct {
	// Node is the drained node.
	Node string
	// Before is the pods' run on Node, After the run of the recreated pods.
	Before, After Result
	// Drained is the time from the drain's start until every pod it
	// evicted was gone; 0 when the drain did not end.
	Drained time.Duration
	// Blocked are the pods of Node the drain had not evicted, or that were
	// not gone, Timeout after the recreated pods' run, each as
	// "namespace/name: why" (the API server's last refusal of its
	// eviction, for a pod a PodDisruptionBudget protects), as kubectl
	// drain --timeout gives up on them. Longhorn keeps an instance
	// manager's PodDisruptionBudget while its node holds the last healthy
	// replica of a volume (longhorn-manager v1.12.0
	// controller/instance_manager_controller.go, syncInstanceManagerPDB and
	// canDeleteInstanceManagerPDB, lines 1207 and 1458, with the default
	// node-drain-policy block-if-contains-last-replica).
	Blocked []string
}

// Drain is the node-drain test of the plan: with every node but Node
// cordoned, a StatefulSet of Pods replicas, each with its own claim, is
// created and its pods land on Node. Every node is uncordoned; then Node is
// drained as kubectl drain does it: cordoned, and all its pods evicted at
// once through the eviction API (which honours PodDisruptionBudgets, and
// is asked again while one refuses) and waited for until they are gone;
// the StatefulSet controller re-creates the workload's pods with the same
// names and claims. On two nodes with a 400Gi disk and two with a 99Gi
// disk, four 100Gi volumes can follow their pods only to the other 400Gi
// node. After's times run from the drain's start. Once the recreated pods
// ran and their volumes settled, Drain waits up to Timeout for the rest of
// the drain (the node's instance manager, which Longhorn lets go only when
// no volume's last healthy replica is left on the node) and reports what
// it left in Blocked. Every node is uncordoned again at the end; the
// StatefulSet and its claims are left for Cleanup.
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
	var d *nodeDrain
	drain := func(ctx context.Context) (time.Time, error) {
		var err error
		start := time.Now()
		if d, err = w.drainNode(ctx, nodes, opts.Node); err != nil {
			return start, err
		}
		return d.start, nil
	}
	out.After, err = w.run(ctx, drain)
	if d == nil {
		return out, fmt.Errorf("drain, second run: %w", err)
	}
	if err != nil {
		d.stop()
		return out, errors.Join(fmt.Errorf("drain, second run: %w", err), d.err())
	}
	o.Logf("waiting up to %s for the drain of %s to end", o.Timeout, opts.Node)
	if out.Drained, out.Blocked, err = d.wait(ctx, o.Timeout); err != nil {
		return out, fmt.Errorf("drain: %w", err)
	}
	if len(out.Blocked) == 0 {
		o.Logf("the drain of %s ended after %s", opts.Node, round(out.Drained))
	} else {
		o.Logf("the drain of %s did not end within %s: %s", opts.Node, o.Timeout, strings.Join(out.Blocked, "; "))
	}
	return out, nil
}
