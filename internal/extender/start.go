package extender

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Start follows the cluster until ctx ends: it keeps the view and the
// overlay from informer events, writes reservations, expires entries, and,
// after taking over from another leader, refuses filters for the fence and
// then rebuilds the overlay from the API. It returns once the view holds
// every node and ledger.
func (e *Extender) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("extender")
	ctx = ctrl.LoggerInto(ctx, log)
	until, err := e.fenceEnd(ctx)
	if err != nil {
		return err
	}
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "extender-reservations"})
	e.fenceUntil.Store(&until)
	e.background = ctx
	e.flight.run(ctx, queue)
	go func() {
		<-ctx.Done()
		queue.ShutDown()
		e.flight.stop()
	}()
	if err := e.follow(ctx); err != nil {
		return err
	}
	e.runWriters(ctx, queue)
	go e.sweep(ctx)
	go e.endFence(ctx, until)
	return nil
}

// fenceEnd returns until when filters are refused: the fence after the
// Lease's acquisition when the Lease shows an earlier leader, else now.
func (e *Extender) fenceEnd(ctx context.Context) (time.Time, error) {
	now := e.opts.Clock.Now()
	if e.opts.Fence <= 0 || e.opts.Lease.Name == "" {
		return now, nil
	}
	lease := &coordinationv1.Lease{}
	if err := e.opts.APIReader.Get(ctx, e.opts.Lease, lease); err != nil {
		return now, fmt.Errorf("reading the leader-election Lease %s: %w", e.opts.Lease, err)
	}
	if lease.Spec.LeaseTransitions == nil || *lease.Spec.LeaseTransitions == 0 {
		return now, nil // the first leader: nobody let pods through before it
	}
	from := now
	if lease.Spec.AcquireTime != nil && lease.Spec.AcquireTime.Time.Before(now) {
		from = lease.Spec.AcquireTime.Time
	}
	return from.Add(e.opts.Fence), nil
}

// endFence waits for the fence to end, then tracks the pods the old leader
// let through whose space the ledgers do not show, and lets filters in.
func (e *Extender) endFence(ctx context.Context, until time.Time) {
	log := ctrl.LoggerFrom(ctx)
	if wait := until.Sub(e.opts.Clock.Now()); wait > 0 {
		e.opts.Metrics.Fenced.Set(1)
		log.Info("Took over from another leader: answering no filter until its pods have bound", "until", until, "fence", e.opts.Fence)
		timer := e.opts.Clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C():
		}
		n, err := e.rebuild(ctx)
		if err != nil {
			log.Error(err, "Rebuilding the pods in flight from the API")
		}
		log.Info("Answering filters again", "podsInFlight", n)
	}
	e.opts.Metrics.Fenced.Set(0)
}

// rebuild tracks, on their nodes, the pods that got a node recently and
// whose volumes' space the ledgers do not show yet: bound pods, and pods
// whose claims carry the selected-node annotation. It returns how many
// pods it tracks.
func (e *Extender) rebuild(ctx context.Context) (int, error) {
	sched, err := e.settings.get(ctx)
	if err != nil {
		return 0, err
	}
	recent := e.opts.Clock.Now().Add(-(e.opts.Fence + sched.PodSchedulingTimeout + sched.NodeReservationTimeout))
	pods := &corev1.PodList{}
	if err := e.opts.Client.List(ctx, pods); err != nil {
		return 0, fmt.Errorf("listing pods: %w", err)
	}
	n := 0
	for i := range pods.Items {
		pod := &pods.Items[i]
		node, how := e.nodeOf(ctx, pod, recent)
		if node == "" {
			continue
		}
		tracked, err := e.adopt(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, pod.UID, node, how)
		if err != nil {
			ctrl.LoggerFrom(ctx).Info("Not tracking a pod of the previous leader", "pod", client.ObjectKeyFromObject(pod), "node", node, "reason", err.Error())
			continue
		}
		if tracked {
			n++
		}
	}
	return n, nil
}

// nodeOf returns the node pod got since recent (bound, or selected for one
// of its claims) and how it is known, or "" for a pod that is not new on a
// node or has finished.
func (e *Extender) nodeOf(ctx context.Context, pod *corev1.Pod, recent time.Time) (string, string) {
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return "", ""
	}
	if pod.Spec.NodeName != "" {
		if boundSince(pod, recent) {
			return pod.Spec.NodeName, knownByRebuild
		}
		return "", ""
	}
	for _, claim := range claimNames(pod) {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := e.opts.Client.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: claim}, pvc); err != nil {
			continue
		}
		if node := pvc.Annotations[annSelectedNode]; node != "" {
			return node, knownBySelectedNode
		}
	}
	return "", ""
}
