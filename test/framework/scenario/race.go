package scenario

import (
	"context"
	"fmt"
	"time"

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
	// the times are kube-scheduler's alone. Its claims are of
	// DefaultStorageClass (immediate binding) unless Common.StorageClass
	// says otherwise.
	BarePods bool
	// OtherWork is what other apps run on the nodes when the race begins;
	// nil is UnevenWork of the Longhorn nodes.
	OtherWork *OtherWork
}

// Race is the race-condition test of the plan: a StatefulSet of Pods
// replicas with parallel pod management, each with its own claim of Size
// from the claim template, so kube-controller-manager creates every pod and
// claim at the same moment. The claims are of
// DefaultWaitForFirstConsumerClass: kube-scheduler chooses each pod's node
// checking the CSIStorageCapacity objects the CSI driver publishes, and the
// volume is provisioned on that choice, as the plan's race has it. On four
// nodes with one 400Gi disk each, sixteen 100Gi volumes fill the cluster
// exactly, so the only placement that gives every pod its data locally is
// four pods per node.
//
// The nodes are not alike, as a real cluster's are not: before the race,
// OtherWork's pods take a share of some nodes' CPU and memory, so that
// kube-scheduler's default scoring prefers the others. Before that, Race
// waits until the capacity published for the class is current, as Cleanup
// does (see waitCapacityCurrent). The times run from the StatefulSet's creation
// (with BarePods, from the pods'). The StatefulSet or the pods, the other
// work's pods, and the claims, are left for Cleanup.
func Race(ctx context.Context, c client.WithWatch, opts RaceOptions) (Result, error) {
	if opts.StorageClass == "" && !opts.BarePods {
		opts.StorageClass = DefaultWaitForFirstConsumerClass
	}
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
	waited, err := waitCapacityCurrent(ctx, c, o, o.StorageClass)
	if err != nil {
		return Result{}, fmt.Errorf("race: %w", err)
	}
	if waited > time.Second {
		o.Logf("waited %s until the storage capacity published for class %s was current", round(waited), o.StorageClass)
	}
	work := opts.OtherWork
	if work == nil {
		nodes, err := longhornNodes(ctx, c, o.SystemNamespace)
		if err != nil {
			return Result{}, fmt.Errorf("race: %w", err)
		}
		uneven := UnevenWork(nodes)
		work = &uneven
	}
	other, err := work.start(ctx, c, o)
	if err != nil {
		return Result{}, fmt.Errorf("race: %w", err)
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
	res.OtherWork = other
	if err != nil {
		return res, fmt.Errorf("race: %w", err)
	}
	return res, nil
}
