package extender

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
)

// How the extender learned a pod's node.
const (
	knownByBinding      = "bound"
	knownBySelectedNode = "selected-node"
	knownByNomination   = "nominated"
	knownByBind         = "bind"
	knownByRebuild      = "rebuild"
	knownByRewrite      = "rewrite"
)

// waitWindow bounds how long the extender keeps counting a pod's space
// after its node is known while the ledgers do not show its reservations,
// how long after its entry lapsed a pod bound later is tracked again, and
// how long after its binding a pod's reservation that expired before the
// ledger saw the binding is written again (holdExpired).
const waitWindow = 5 * time.Minute

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
			if n, ok := o.(*lhv1.Node); ok && gone {
				e.view.deleteNode(n.Name)
			} else if ok {
				e.view.setNode(n)
			}
		})},
		{&dsv1.DiskSchedule{}, e.handler(func(o client.Object, gone bool) {
			ds, ok := o.(*dsv1.DiskSchedule)
			if !ok {
				return
			}
			if gone {
				e.view.deleteLedger(ds.Name)
				return
			}
			e.view.setLedger(ds)
			e.ledgerChanged(ds)
		})},
		{&corev1.Pod{}, e.handler(func(o client.Object, gone bool) {
			if pod, ok := o.(*corev1.Pod); ok {
				e.podChanged(pod, gone)
			}
		})},
		{&corev1.PersistentVolumeClaim{}, e.handler(func(o client.Object, gone bool) {
			if pvc, ok := o.(*corev1.PersistentVolumeClaim); ok && !gone {
				e.claimChanged(pvc)
			}
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
	return nil
}

// handler adapts fn, called under e.mu with each object of Longhorn's
// namespace (or any namespace for pods and claims) and whether it is gone.
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
		case *lhv1.Node, *dsv1.DiskSchedule:
			if o.GetNamespace() != e.opts.Namespace {
				return
			}
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		fn(o, gone)
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { call(obj, false) },
		UpdateFunc: func(_, obj any) { call(obj, false) },
		DeleteFunc: func(obj any) { call(obj, true) },
	}
}

// ledgerChanged settles the overlay entries that ds now shows, counts the
// decisions on reservations the extender wrote, and queues the disk again
// while an entry still waits for a write there. Called with e.mu held.
func (e *Extender) ledgerChanged(ds *dsv1.DiskSchedule) {
	for volume, pod := range e.written[ds.Name] {
		res, state, ok := ledger.ReservationOf(ds, volume)
		switch {
		case !ok || res.Pod != pod:
			delete(e.written[ds.Name], volume)
		case state != "":
			e.opts.Metrics.Reservations.WithLabelValues(string(state)).Inc()
			delete(e.written[ds.Name], volume)
		}
	}
	for volume := range ds.Spec.Reservations {
		if res, state, _ := ledger.ReservationOf(ds, volume); state == dsv1.ReservationStateExpired && res.Pod != "" {
			e.holdExpired(ds, volume, res)
		}
	}
	waiting := false
	for _, entry := range e.overlay.entries() {
		if entry.node != ds.Spec.NodeID || entry.known == knownByNomination {
			continue
		}
		e.settleShown(entry)
		for volume, disk := range entry.pending {
			_, placed := entry.replicas[volume]
			waiting = waiting || (disk == ds.Name && !placed)
		}
	}
	if waiting && e.writes != nil {
		e.writes.Add(ds.Name)
	}
}

// settleShown settles each volume of entry that the ledgers show as held
// for the pod: its reservation on its disk, or the request of the replica
// Longhorn placed on the node. Called with e.mu held.
func (e *Extender) settleShown(entry *inflight) {
	for volume, disk := range entry.pending {
		if r, ok := entry.replicas[volume]; ok {
			if ds := e.view.ledger(r.disk); ds != nil {
				if _, requested := ds.Spec.Replicas[r.name]; requested {
					e.settle(entry, volume, true)
					continue
				}
			}
		}
		ds := e.view.ledger(disk)
		if ds == nil {
			continue
		}
		res, state, ok := ledger.ReservationOf(ds, volume)
		if !ok || res.Pod != entry.key() || res.Size != entry.sizes[volume] || state == dsv1.ReservationStateExpired {
			continue // not there, or an old one the writer replaces
		}
		if state == dsv1.ReservationStateRejected && keepsClaim(entry) {
			// Requested again once the ledger shows room: the writer drops
			// the rejected one first (planReservations).
			entry.refused = markVolume(entry.refused, volume)
			continue
		}
		e.settle(entry, volume, state != dsv1.ReservationStateRejected)
	}
}

// settle ends volume's claim in entry: held tells whether the ledger holds
// its space. Called with e.mu held.
func (e *Extender) settle(entry *inflight, volume string, held bool) {
	if e.overlay.settle(entry, volume) {
		e.opts.Metrics.NodeReservation.WithLabelValues(fmt.Sprint(held)).Observe(e.opts.Clock.Since(entry.narrowed).Seconds())
	}
	e.opts.Metrics.InFlight.Set(float64(e.overlay.len()))
}

// podChanged follows a pod in flight: its node once bound or nominated, its
// end when deleted or when kube-scheduler reports a newer failure. Called
// with e.mu held.
func (e *Extender) podChanged(pod *corev1.Pod, gone bool) {
	entry := e.overlay.get(pod.UID)
	if entry == nil {
		e.bindLapsed(pod, gone)
		return
	}
	switch {
	case gone || pod.DeletionTimestamp != nil:
		e.expire(entry, "deleted")
	case pod.Spec.NodeName != "":
		e.learn(entry, pod.Spec.NodeName, knownByBinding)
	case entry.node != "":
	case pod.Status.NominatedNodeName != "":
		e.learn(entry, pod.Status.NominatedNodeName, knownByNomination)
	}
	// A PodScheduled=False condition is no sign that the cycle the filter
	// answered failed: kube-scheduler writes a failed cycle's condition
	// asynchronously, so it can arrive after the filter of the pod's next
	// cycle, which may be binding the pod. A failed cycle's entry ends with
	// the pod's next filter or the pod-scheduling timeout.
}

// bindLapsed tracks a pod bound after its entry lapsed (kube-scheduler's
// binding took longer than scheduler-extender-pod-scheduling-timeout): its
// volumes are packed onto its node's disks and reserved, in the same
// handler as the binding, so no filter sees the space free meanwhile.
// Called with e.mu held.
func (e *Extender) bindLapsed(pod *corev1.Pod, gone bool) {
	if _, lapsed := e.lapsed[pod.UID]; !lapsed || (pod.Spec.NodeName == "" && !gone && pod.DeletionTimestamp == nil) {
		return
	}
	delete(e.lapsed, pod.UID)
	if gone || pod.DeletionTimestamp != nil {
		return
	}
	if err := e.adoptLocked(e.background, pod, pod.Spec.NodeName, knownByBinding); err != nil {
		ctrl.LoggerFrom(e.background).Info("A pod bound after its space lapsed does not fit its node", "pod", client.ObjectKeyFromObject(pod),
			"node", pod.Spec.NodeName, "reason", err.Error())
	}
}

// claimChanged learns the node of the pods in flight that use pvc once
// kube-scheduler's volume binding selected a node for it. Called with e.mu held.
func (e *Extender) claimChanged(pvc *corev1.PersistentVolumeClaim) {
	node := pvc.Annotations[annSelectedNode]
	if node == "" {
		return
	}
	for _, entry := range e.overlay.entries() {
		if entry.pod.Namespace == pvc.Namespace && slices.Contains(entry.claims, pvc.Name) {
			e.learn(entry, node, knownBySelectedNode)
		}
	}
}

// learn narrows entry to node and, unless node is only nominated, queues
// the writes of its reservations. An entry that did not offer node, or was
// narrowed to another node by a nomination, is dropped and its pod adopted
// on node afresh. Called with e.mu held.
func (e *Extender) learn(entry *inflight, node, how string) {
	if entry.node != "" && (entry.node == node || how == knownByNomination) {
		if entry.known == knownByNomination && how != knownByNomination {
			entry.known = how
			e.queueWrites(entry)
		}
		return
	}
	if entry.node != "" {
		e.overlay.drop(entry.uid)
		e.adoptLater(entry, node, how)
		return
	}
	e.opts.Metrics.PodSchedulingWait.WithLabelValues("true").Observe(e.opts.Clock.Since(entry.filtered).Seconds())
	if !e.overlay.narrow(entry, node, how, e.opts.Clock.Now()) {
		e.adoptLater(entry, node, how)
		return
	}
	if how != knownByNomination {
		e.settleShown(entry)
	}
	if how != knownByNomination && how != knownByBind {
		e.queueWrites(entry) // Bind writes its pod's reservations itself
	}
	e.opts.Metrics.InFlight.Set(float64(e.overlay.len()))
}

// expire drops entry, whose pod will not use the space it was offered.
// Called with e.mu held.
func (e *Extender) expire(entry *inflight, reason string) {
	if e.overlay.drop(entry.uid) == nil {
		return
	}
	if entry.node == "" {
		e.opts.Metrics.PodSchedulingWait.WithLabelValues("false").Observe(e.opts.Clock.Since(entry.filtered).Seconds())
		if reason == "no-node" {
			e.lapsed[entry.uid] = e.opts.Clock.Now()
		}
	}
	e.opts.Metrics.Expired.WithLabelValues(reason).Inc()
	e.opts.Metrics.InFlight.Set(float64(e.overlay.len()))
	ctrl.LoggerFrom(e.background).V(1).Info("A pod in flight no longer holds space", "pod", entry.pod, "node", entry.node, "reason", reason)
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
		now := e.opts.Clock.Now()
		e.mu.Lock()
		for uid, at := range e.lapsed {
			if now.Sub(at) > waitWindow {
				delete(e.lapsed, uid)
			}
		}
		for _, entry := range e.overlay.entries() {
			switch {
			case entry.node == "" && now.Sub(entry.filtered) > sched.PodSchedulingTimeout:
				e.expire(entry, "no-node")
			case entry.known == knownByNomination && now.Sub(entry.narrowed) > sched.PodSchedulingTimeout:
				e.expire(entry, "no-node")
			case entry.node != "" && now.Sub(entry.narrowed) > waitWindow:
				// A pod on its node keeps its space counted until the
				// ledgers show it, however long the writes take.
				e.expire(entry, "no-reservation")
			}
		}
		e.mu.Unlock()
	}
}

// holdExpired keeps counting, in the overlay, the space of a reservation
// that expired while its pod, bound to node, still waits for Longhorn to
// place its volume's replica there, and queues it to be written again. The
// ledger holds the reservation of a bound pod (DESIGN rule 6), so this
// happens only when the pod bound after the decision that expired it. It
// runs under the same lock as the view's update that shows the expiry, so
// no filter sees the space free in between. Called with e.mu held.
func (e *Extender) holdExpired(ds *dsv1.DiskSchedule, volume string, res dsv1.DiskScheduleReservation) {
	if e.writes == nil {
		return
	}
	pod, ok := e.waitingPod(ds, volume, res)
	if !ok {
		return
	}
	if entry := e.overlay.get(pod.UID); entry != nil {
		return // followed already
	}
	node := ds.Spec.NodeID
	entry := &inflight{
		pod: client.ObjectKeyFromObject(pod), uid: pod.UID, claims: claimNames(pod), filtered: e.opts.Clock.Now(),
		offered: map[string]fit{node: {OK: true, Assignment: map[string]string{volume: ds.Name}, Sizes: map[string]int64{volume: res.Size}}},
	}
	e.overlay.add(entry)
	e.overlay.narrow(entry, node, knownByRewrite, e.opts.Clock.Now())
	e.queueWrites(entry)
	e.opts.Metrics.InFlight.Set(float64(e.overlay.len()))
}

// waitingPod returns the pod a reservation of volume on ds was made for
// when that pod still needs it: bound to the disk's node less than
// waitWindow ago, not being deleted, and without a replica of the
// volume placed on that node yet. Called with e.mu held.
func (e *Extender) waitingPod(ds *dsv1.DiskSchedule, volume string, res dsv1.DiskScheduleReservation) (*corev1.Pod, bool) {
	ns, name, ok := strings.Cut(res.Pod, "/")
	if !ok {
		return nil, false
	}
	ctx := e.background
	pod := &corev1.Pod{}
	if err := e.opts.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, pod); err != nil {
		return nil, false
	}
	node := ds.Spec.NodeID
	if pod.Spec.NodeName != node || pod.DeletionTimestamp != nil || !boundSince(pod, e.opts.Clock.Now().Add(-waitWindow)) {
		return nil, false
	}
	placed, err := e.placedOnNode(ctx, []want{{volume: volume}}, node)
	if err != nil || len(placed) > 0 {
		return nil, false // its replica holds the space now
	}
	return pod, true
}

// boundSince reports whether pod was bound after t.
func boundSince(pod *corev1.Pod, t time.Time) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time.After(t)
		}
	}
	return false
}
