package diskschedule

import (
	"context"
	"fmt"
	"strings"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/clusterview"
	"github.com/longhorn/diskschedule/internal/index"
	"github.com/longhorn/diskschedule/internal/ledger"
)

// input reads everything one decision on ds depends on, from the cache.
// Its lists are the cache's own objects, not copies: they are only read.
func (r *Reconciler) input(ctx context.Context, ds *dsv1.DiskSchedule) (ledger.Input, error) {
	sched, _, err := clusterview.Settings(ctx, r.client, ds.Namespace)
	if err != nil {
		return ledger.Input{}, err
	}
	node := &lhv1.Node{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: ds.Namespace, Name: ds.Spec.NodeID}, node); err != nil {
		if !apierrors.IsNotFound(err) {
			return ledger.Input{}, fmt.Errorf("reading Longhorn node %s: %w", ds.Spec.NodeID, err)
		}
		node = nil
	}
	disk, found := ledger.DiskOf(node, ds.Spec.Name, ds.Name, sched.OverProvisioningPercentage, sched.MinimalAvailablePercentage)
	if !found {
		// The limit last known stays until the disk is back or its ledger goes.
		disk.Limit = ds.Status.StorageLimit
	}
	persisted, placed, images, err := r.persisted(ctx, ds)
	if err != nil {
		return ledger.Input{}, err
	}
	actual, err := r.actualSizes(ctx, ds, disk.Space)
	if err != nil {
		return ledger.Input{}, err
	}
	pods, err := r.reservationPods(ctx, ds)
	if err != nil {
		return ledger.Input{}, err
	}
	onNode, err := r.replicasOnNode(ctx, ds)
	if err != nil {
		return ledger.Input{}, err
	}
	bestEffort, err := r.bestEffort(ctx, ds)
	if err != nil {
		return ledger.Input{}, err
	}
	return ledger.Input{
		Spec:               ds.Spec,
		Generation:         ds.Generation,
		Previous:           ds.Status,
		Disk:               disk,
		Persisted:          persisted,
		PlacedVolumes:      placed,
		ReplicaImages:      images,
		BestEffort:         bestEffort,
		ActualSizes:        actual,
		Pods:               pods,
		NodeReplicas:       onNode,
		ReservationTimeout: r.timeouts.NodeReservationTimeout(),
		Now:                r.clock.Now(),
	}, nil
}

// persisted names what Longhorn has persisted on ds's disk: Replicas whose
// spec.diskID is the disk and BackingImages whose spec.diskFileSpecMap
// lists it. Their new requests are adopted (rule 7). It also maps each of
// those replicas to its volume, for the reservations they take over, and
// to the backing image it starts from (spec.backingImage), whose copy on
// the disk it needs to start.
func (r *Reconciler) persisted(ctx context.Context, ds *dsv1.DiskSchedule) (ledger.Owners, map[string]string, map[string]string, error) {
	replicas := &lhv1.ReplicaList{}
	if err := r.client.List(ctx, replicas, client.InNamespace(ds.Namespace), client.MatchingFields{index.ReplicaByDisk: ds.Name},
		client.UnsafeDisableDeepCopy); err != nil {
		return ledger.Owners{}, nil, nil, fmt.Errorf("listing the replicas on disk %s: %w", ds.Name, err)
	}
	images := &lhv1.BackingImageList{}
	if err := r.client.List(ctx, images, client.InNamespace(ds.Namespace), client.MatchingFields{index.BackingImageByDisk: ds.Name},
		client.UnsafeDisableDeepCopy); err != nil {
		return ledger.Owners{}, nil, nil, fmt.Errorf("listing the backing images on disk %s: %w", ds.Name, err)
	}
	out := ledger.Owners{Replicas: map[string]bool{}, BackingImages: map[string]bool{}}
	placed := map[string]string{}
	var startsFrom map[string]string
	for i := range replicas.Items {
		rep := &replicas.Items[i]
		out.Replicas[rep.Name] = true
		if v := rep.Spec.VolumeName; v != "" {
			placed[rep.Name] = v
		}
		if bi := rep.Spec.BackingImage; bi != "" {
			if startsFrom == nil {
				startsFrom = map[string]string{}
			}
			startsFrom[rep.Name] = bi
		}
	}
	for i := range images.Items {
		out.BackingImages[images.Items[i].Name] = true
	}
	return out, placed, startsFrom, nil
}

// bestEffort names the volumes of ds's live reservations whose
// dataLocality is best-effort: their reservation yields at once to a
// Longhorn placement that fits what Longhorn counts (rule 6). A volume not
// in the cache is not named.
func (r *Reconciler) bestEffort(ctx context.Context, ds *dsv1.DiskSchedule) (map[string]bool, error) {
	var out map[string]bool
	for volume := range ds.Spec.Reservations {
		if !reservationLive(ds, volume) {
			continue
		}
		v := &lhv1.Volume{}
		if err := r.client.Get(ctx, client.ObjectKey{Namespace: ds.Namespace, Name: volume}, v); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("reading volume %s of a reservation: %w", volume, err)
		}
		if v.Spec.DataLocality == lhv1.DataLocalityBestEffort {
			if out == nil {
				out = map[string]bool{}
			}
			out[volume] = true
		}
	}
	return out, nil
}

// actualSizes returns, for each replica request of ds that Longhorn's disk
// status does not count yet (space), the bytes of data its replica holds:
// its Volume's status.actualSize, which Longhorn's scheduler takes as the
// replica's required storage. A replica or volume not in the cache holds
// none.
func (r *Reconciler) actualSizes(ctx context.Context, ds *dsv1.DiskSchedule, space *ledger.ActualSpace) (map[string]int64, error) {
	if space == nil {
		return nil, nil
	}
	out := map[string]int64{}
	volumes := map[string]int64{}
	for name := range ds.Spec.Replicas {
		if space.Replicas[name] {
			continue
		}
		rep := &lhv1.Replica{}
		if err := r.client.Get(ctx, client.ObjectKey{Namespace: ds.Namespace, Name: name}, rep); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("reading replica %s: %w", name, err)
		}
		volume := rep.Spec.VolumeName
		size, seen := volumes[volume]
		if !seen && volume != "" {
			v := &lhv1.Volume{}
			err := r.client.Get(ctx, client.ObjectKey{Namespace: ds.Namespace, Name: volume}, v)
			if client.IgnoreNotFound(err) != nil {
				return nil, fmt.Errorf("reading volume %s: %w", volume, err)
			}
			size = v.Status.ActualSize
			volumes[volume] = size
		}
		if size > 0 {
			out[name] = size
		}
	}
	return out, nil
}

// reservationPods returns, for each reservation of ds that is still to be
// decided or holds space, where its pod is (rule 6): bound to the disk's
// node, bound to another node, or gone (not found, or being deleted). A
// reservation whose pod is not bound yet is left out.
func (r *Reconciler) reservationPods(ctx context.Context, ds *dsv1.DiskSchedule) (map[string]ledger.PodBinding, error) {
	var out map[string]ledger.PodBinding
	for volume, res := range ds.Spec.Reservations {
		if !reservationLive(ds, volume) {
			continue
		}
		namespace, name, ok := strings.Cut(res.Pod, "/")
		if !ok || namespace == "" || name == "" {
			continue
		}
		binding := ledger.PodBinding{}
		pod := &corev1.Pod{}
		err := r.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pod)
		switch {
		case apierrors.IsNotFound(err):
			binding.State = ledger.PodGone
		case err != nil:
			return nil, fmt.Errorf("reading pod %s of the reservation of volume %s: %w", res.Pod, volume, err)
		case !pod.DeletionTimestamp.IsZero():
			binding.State = ledger.PodGone
		case pod.Spec.NodeName == ds.Spec.NodeID:
			binding = ledger.PodBinding{State: ledger.PodBoundHere, Since: boundAt(pod)}
		case pod.Spec.NodeName != "":
			binding = ledger.PodBinding{State: ledger.PodBoundElsewhere, Node: pod.Spec.NodeName}
		default:
			continue
		}
		if out == nil {
			out = map[string]ledger.PodBinding{}
		}
		out[volume] = binding
	}
	return out, nil
}

// replicasOnNode returns, for each reservation of ds that is still to be
// decided or holds space, a replica of its volume that Longhorn persisted
// on another disk of ds's node (rule 6).
func (r *Reconciler) replicasOnNode(ctx context.Context, ds *dsv1.DiskSchedule) (map[string]string, error) {
	var out map[string]string
	for volume := range ds.Spec.Reservations {
		if !reservationLive(ds, volume) {
			continue
		}
		replicas := &lhv1.ReplicaList{}
		if err := r.client.List(ctx, replicas, client.InNamespace(ds.Namespace), client.MatchingFields{index.ReplicaByVolume: volume},
			client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("listing the replicas of volume %s: %w", volume, err)
		}
		for i := range replicas.Items {
			rep := &replicas.Items[i]
			if rep.Spec.NodeID != ds.Spec.NodeID || rep.Spec.DiskID == "" || rep.Spec.DiskID == ds.Name || !rep.DeletionTimestamp.IsZero() {
				continue
			}
			if out == nil {
				out = map[string]string{}
			}
			if cur, ok := out[volume]; !ok || rep.Name < cur {
				out[volume] = rep.Name
			}
		}
	}
	return out, nil
}

// reservationLive reports whether ds's reservation of volume is still to be
// decided or holds space: only such a reservation needs its pod and its
// volume's replicas looked up.
func reservationLive(ds *dsv1.DiskSchedule, volume string) bool {
	_, state, ok := ledger.ReservationOf(ds, volume)
	return ok && (state == "" || state == dsv1.ReservationStateScheduled)
}

// boundAt returns when pod was bound to its node: its PodScheduled
// condition's lastTransitionTime, or, for a pod created bound (without the
// condition), its creation.
func boundAt(pod *corev1.Pod) time.Time {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	return pod.CreationTimestamp.Time
}
