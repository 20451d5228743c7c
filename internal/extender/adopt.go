package extender

import (
	"context"
	"fmt"
	"strings"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/index"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/settings"
)

// This file holds the adoption of pods whose node kube-scheduler chose
// without this extender's answer, and what the in-flight state is told of
// the cluster that it does not read itself, read through the manager's
// cache without its lock.

// adopt tracks the pod with key and uid on node, which kube-scheduler chose
// without this extender's answer being known (another cycle's, or another
// leader's): its volumes that need new space there are packed onto the
// node's disks and reserved like those of a filtered pod. It reports
// whether the pod is in flight afterwards.
func (e *Extender) adopt(ctx context.Context, key types.NamespacedName, uid types.UID, node, how string) (bool, error) {
	pod := &corev1.Pod{}
	if err := e.opts.Client.Get(ctx, key, pod); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	if pod.UID != uid {
		return false, nil
	}
	return e.adoptPod(ctx, pod, node, how)
}

// adoptPod is adopt of pod as read.
func (e *Extender) adoptPod(ctx context.Context, pod *corev1.Pod, node, how string) (bool, error) {
	if tracked, known := e.flight.following(pod.UID); known {
		return tracked, nil
	}
	vols, sched, err := e.load(ctx, pod)
	if err != nil || len(vols) == 0 {
		tracked, _ := e.flight.following(pod.UID)
		return tracked, err
	}
	tracked, later, err := e.adoptVolumes(pod, vols, sched, node, how)
	e.adoptLater(ctx, later)
	return tracked, err
}

// adoptVolumes tracks pod on node with vols, its volumes that need local
// space, evaluated on a snapshot of the in-flight state without its lock
// (the pod is on node already: its local space is reserved whatever room
// Longhorn finds for the other replicas), and again when the pods let
// through meanwhile claim more there. It returns whether the pod is in
// flight afterwards, and the pods to adopt afresh.
func (e *Extender) adoptVolumes(pod *corev1.Pod, vols []podVolume, sched settings.Scheduling, node, how string) (bool, []adoption, error) {
	q := question{pod: pod.Namespace + "/" + pod.Name, vols: vols, candidates: []string{node}, sched: sched,
		how: withOverlay, budget: e.opts.Budget}
	for {
		s := e.flight.adoptSnapshot(pod.UID)
		if s == nil {
			return true, nil, nil // its node is known already
		}
		ft := e.evaluate(s, q)[node]
		if !ft.OK {
			return false, nil, fmt.Errorf("its volumes do not fit on node %s: %s", node, ft.Reason)
		}
		if len(ft.Assignment) == 0 {
			return false, nil, nil
		}
		if ok, later := e.flight.adopt(s, pod, node, how, ft); ok {
			tracked, _ := e.flight.following(pod.UID)
			return tracked, later, nil
		}
	}
}

// adoptLater tracks, in the background, the pods of later afresh on the
// nodes where the filter did not offer them.
func (e *Extender) adoptLater(ctx context.Context, later []adoption) {
	for _, a := range later {
		go func() {
			if _, err := e.adopt(ctx, a.pod, a.uid, a.node, a.how); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "Tracking a pod on its node", "pod", a.pod, "node", a.node)
			}
		}()
	}
}

// load returns the pod's volumes that need local space and the settings in
// effect.
func (e *Extender) load(ctx context.Context, pod *corev1.Pod) ([]podVolume, settings.Scheduling, error) {
	sched, err := e.settings.get(ctx)
	if err != nil {
		return nil, settings.Scheduling{}, err
	}
	vols, err := e.resolver.localVolumes(ctx, pod, sched)
	if err != nil || len(vols) == 0 {
		return nil, settings.Scheduling{}, err
	}
	return vols, sched, nil
}

// waitingPods returns, by volume, the pods whose reservations ds shows
// expired and which still need them (waitingPod), for the in-flight state
// to hold again (flight.holdExpired).
func (e *Extender) waitingPods(ctx context.Context, ds *dsv1.DiskSchedule) map[string]*corev1.Pod {
	var out map[string]*corev1.Pod
	for volume := range ds.Spec.Reservations {
		res, state, _ := ledger.ReservationOf(ds, volume)
		if state != dsv1.ReservationStateExpired || res.Pod == "" {
			continue
		}
		if pod, ok := e.waitingPod(ctx, ds, volume, res); ok {
			if out == nil {
				out = map[string]*corev1.Pod{}
			}
			out[volume] = pod
		}
	}
	return out
}

// waitingPod returns the pod a reservation of volume on ds was made for
// when that pod still needs it: bound to the disk's node less than
// waitWindow ago, not being deleted, and without a replica of the volume
// placed on that node yet.
func (e *Extender) waitingPod(ctx context.Context, ds *dsv1.DiskSchedule, volume string, res dsv1.DiskScheduleReservation) (*corev1.Pod, bool) {
	ns, name, ok := strings.Cut(res.Pod, "/")
	if !ok {
		return nil, false
	}
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

// placedOnNode returns the volumes of wants that already have a replica on
// node, as the cache shows Longhorn's Replicas, with that replica: its
// request, not a reservation, holds their space.
func (e *Extender) placedOnNode(ctx context.Context, wants []want, node string) (map[string]placedReplica, error) {
	out := map[string]placedReplica{}
	for _, w := range wants {
		replicas := &lhv1.ReplicaList{}
		if err := e.opts.Client.List(ctx, replicas, client.InNamespace(e.opts.Namespace),
			client.MatchingFields{index.ReplicaByVolume: w.volume}, client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("listing the replicas of volume %s: %w", w.volume, err)
		}
		for i := range replicas.Items {
			if r := &replicas.Items[i]; r.Spec.NodeID == node && r.Spec.DiskID != "" && r.DeletionTimestamp.IsZero() {
				out[w.volume] = placedReplica{name: r.Name, disk: r.Spec.DiskID}
			}
		}
	}
	return out, nil
}
