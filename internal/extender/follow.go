package extender

import (
	"context"
	"fmt"
	"maps"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

// annSelectedNode is the annotation kube-scheduler's volume binding puts on
// a WaitForFirstConsumer claim with the node it chose, before the pod binds.
const annSelectedNode = "volume.kubernetes.io/selected-node"

// sweepPeriod is how often entries whose pod went nowhere are looked for.
const sweepPeriod = 500 * time.Millisecond

// follow registers the handlers that keep the view and the overlay from the
// informers' events, waits until they have seen every object, and removes
// them when ctx ends.
func (e *Extender) follow(ctx context.Context) error {
	handlers := []struct {
		obj client.Object
		h   toolscache.ResourceEventHandlerFuncs
	}{
		{&lhv1.Node{}, e.handler(func(o client.Object, gone bool) {
			if n, ok := o.(*lhv1.Node); ok {
				e.flight.nodeEvent(n, gone)
			}
		})},
		{&dsv1.DiskSchedule{}, e.handler(func(o client.Object, gone bool) {
			if ds, ok := o.(*dsv1.DiskSchedule); ok {
				var waiting map[string]*corev1.Pod
				if !gone {
					waiting = e.waitingPods(ctx, ds)
				}
				e.flight.ledgerEvent(ds, gone, waiting)
			}
		})},
		{&corev1.Pod{}, e.handler(func(o client.Object, gone bool) {
			if pod, ok := o.(*corev1.Pod); ok {
				e.podEvent(ctx, pod, gone)
			}
		})},
		{&corev1.PersistentVolumeClaim{}, e.handler(func(o client.Object, gone bool) {
			if pvc, ok := o.(*corev1.PersistentVolumeClaim); ok && !gone {
				e.adoptLater(ctx, e.flight.claimEvent(pvc))
			}
		})},
		{&lhv1.Setting{}, e.handler(func(client.Object, bool) {
			e.settings.longhorn.changed()
		})},
	}
	// What a filter reads without following it: started now, so that the
	// first filter after taking over does not wait for a full list.
	for _, obj := range []client.Object{&corev1.PersistentVolume{}, &storagev1.StorageClass{}, &lhv1.Volume{}, &lhv1.Replica{}} {
		inf, err := e.opts.Informers.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("getting the informer of %T: %w", obj, err)
		}
		if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			return fmt.Errorf("waiting until the extender has seen every %T: %w", obj, ctx.Err())
		}
	}
	for _, h := range handlers {
		inf, err := e.opts.Informers.GetInformer(ctx, h.obj)
		if err != nil {
			return fmt.Errorf("getting the informer of %T: %w", h.obj, err)
		}
		reg, err := inf.AddEventHandler(h.h)
		if err != nil {
			return fmt.Errorf("watching %T: %w", h.obj, err)
		}
		go func() {
			<-ctx.Done()
			_ = inf.RemoveEventHandler(reg)
		}()
		if !toolscache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
			return fmt.Errorf("waiting until the extender has seen every %T: %w", h.obj, ctx.Err())
		}
	}
	// The settings read from now on are kept until a Setting changes, and
	// read on every call again once the handlers are gone.
	e.settings.longhorn.changed()
	e.settings.longhorn.following.Store(true)
	go func() {
		<-ctx.Done()
		e.settings.longhorn.following.Store(false)
	}()
	return nil
}

// podEvent follows a pod in flight (flight.podEvent), tracks again on its
// node a pod bound after its entry lapsed, before the pod's next event, and
// holds again the reservations of a pod that expired before it was bound
// (holdBoundLate).
func (e *Extender) podEvent(ctx context.Context, pod *corev1.Pod, gone bool) {
	later, lapsed := e.flight.podEvent(pod, gone)
	e.adoptLater(ctx, later)
	if !lapsed {
		if !gone {
			e.holdBoundLate(ctx, pod)
		}
		return
	}
	if _, err := e.adoptPod(ctx, pod, pod.Spec.NodeName, knownByBinding); err != nil {
		ctrl.LoggerFrom(ctx).Info("A pod bound after its space lapsed does not fit its node", "pod", client.ObjectKeyFromObject(pod),
			"node", pod.Spec.NodeName, "reason", err.Error())
	}
}

// holdBoundLate holds again, in flight, the reservations made for pod,
// bound to its node less than waitWindow ago, that expired before it was
// bound, while it still needs them (waitingPods): kube-scheduler's volume
// binding outlasted the node-reservation timeout. The ledger holds only
// the reservation of a pod bound before it expires (DESIGN rule 6) and
// shows no change when the pod binds later, so no ledger event would.
func (e *Extender) holdBoundLate(ctx context.Context, pod *corev1.Pod) {
	if pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil || !boundSince(pod, e.opts.Clock.Now().Add(-waitWindow)) {
		return
	}
	for _, ds := range e.flight.expiredFor(pod) {
		waiting := e.waitingPods(ctx, ds)
		maps.DeleteFunc(waiting, func(_ string, p *corev1.Pod) bool { return p.UID != pod.UID })
		if len(waiting) > 0 {
			e.flight.holdAgain(ds.Name, waiting)
		}
	}
}

// handler adapts fn, called with each object of Longhorn's namespace (or
// any namespace for pods and claims) and whether it is gone.
func (e *Extender) handler(fn func(o client.Object, gone bool)) toolscache.ResourceEventHandlerFuncs {
	call := func(obj any, gone bool) {
		if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		o, ok := obj.(client.Object)
		if !ok {
			return
		}
		switch o.(type) {
		case *lhv1.Node, *dsv1.DiskSchedule, *lhv1.Setting:
			if o.GetNamespace() != e.opts.Namespace {
				return
			}
		}
		fn(o, gone)
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { call(obj, false) },
		UpdateFunc: func(_, obj any) { call(obj, false) },
		DeleteFunc: func(obj any) { call(obj, true) },
	}
}

// sweep expires, until ctx ends, the entries whose pods got no node within
// scheduler-extender-pod-scheduling-timeout and those whose reservations
// the ledgers did not show within waitWindow of the node being known.
func (e *Extender) sweep(ctx context.Context) {
	ticker := e.opts.Clock.NewTicker(sweepPeriod)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
		sched, err := e.settings.get(ctx)
		if err != nil {
			continue
		}
		e.flight.sweep(sched.PodSchedulingTimeout)
	}
}
