package extender

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"

	"github.com/longhorn/diskschedule/internal/index"
	"github.com/longhorn/diskschedule/internal/placement"
	"github.com/longhorn/diskschedule/internal/settings"
)

// CSIDriver is the name of Longhorn's CSI driver and provisioner.
const CSIDriver = "driver.longhorn.io"

// podVolume is one Longhorn volume a pod uses.
type podVolume struct {
	// Name is the Longhorn Volume's name (for an unbound claim, the name the
	// provisioner will give it: pvc-<claim UID>).
	Name string
	// Size is the volume's size in bytes.
	Size int64
	// NodeSelector and DiskSelector restrict where its replicas may go.
	NodeSelector, DiskSelector []string
	// ReplicaNodes are the nodes that hold a replica of the volume.
	ReplicaNodes map[string]bool
	// HealthyNodes are the nodes that hold a healthy replica of the volume,
	// as Longhorn's volume controller counts one (isHealthyAndActiveReplica:
	// spec.healthyAt set, spec.failedAt not; a detached volume's stopped
	// replicas stay healthy), not being evicted (Longhorn sets a replica's
	// spec.evictionRequested when its node or disk is evicted). Only such a
	// node keeps a restarting pod (restartNode).
	HealthyNodes map[string]bool
	// Shared is true for a ReadWriteMany volume that Longhorn attaches on
	// its share manager's node, not the pod's (volume_attachment_controller.go):
	// it needs no space on the pod's node whatever its data locality.
	Shared bool
	// NoLocalReplica, when set, says why Longhorn will not create the
	// volume's local replica on the pod's node now (its replicas exist and
	// Longhorn creates no new one: rebuilding disabled, the volume not
	// healthy, or migrating; volume_controller.go): no local space is asked
	// and no reservation written.
	NoLocalReplica string
	// Replicas are its replicas placed on a node, not failed.
	Replicas []placement.Replica
	// kind says how Longhorn places its replicas (needsLocalSpace).
	kind
	// spec is placementVolume's answer, made once when the volume is
	// resolved (nil: made on each call), so a filter over many nodes reads
	// one copy for every disk.
	spec *lhv1.Volume
	// placeKey is placementKey's answer, made once when the volume is
	// resolved ("": made on each call).
	placeKey string
}

// memoize makes placementVolume's and placementKey's answers once, for a
// volume resolved for a filter that reads them for every node.
func (v *podVolume) memoize() {
	v.spec, v.placeKey = v.placementVolume(), placementKey(*v)
}

// placementVolume returns the volume as placement's disk eligibility reads
// it: its size, data engine and disk selector.
func (v *podVolume) placementVolume() *lhv1.Volume {
	if v.spec != nil {
		return v.spec
	}
	return &lhv1.Volume{Spec: lhv1.VolumeSpec{Size: v.Size, DataEngine: v.DataEngine, DiskSelector: v.DiskSelector}}
}

// resolver finds a pod's Longhorn volumes through the manager's cache. It
// only reads what it gets, so it reads the cache's own objects, without
// the cache's deep copy (client.UnsafeDisableDeepCopy), and keeps only
// values and slices it never changes.
type resolver struct {
	client    client.Reader
	namespace string
}

// localVolumes returns the pod's Longhorn volumes that need space on its
// node (needsLocalSpace), skipping claims of other drivers. The pod's other
// Longhorn volumes (data locality disabled, ReadWriteMany, or whose local
// replica Longhorn will not create) are resolved too, so a claim that
// cannot be read fails the pod's filter whatever its kind, and then left
// out: the extender neither packs nor reserves them, and they keep no pod
// near their replicas. sched is the settings in effect.
func (r *resolver) localVolumes(ctx context.Context, pod *corev1.Pod, sched settings.Scheduling) ([]podVolume, error) {
	var out []podVolume
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		pv, ok, err := r.claimVolume(ctx, pod.Namespace, v.PersistentVolumeClaim.ClaimName)
		if err != nil {
			return nil, err
		}
		if ok && pv.NoLocalReplica == "" {
			pv.NoLocalReplica = noLocalReplica(pv, sched)
		}
		if ok && needsLocalSpace(pv) {
			pv.memoize()
			out = append(out, pv)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// claimVolume resolves one claim: bound → PV with Longhorn's CSI driver →
// Volume; unbound with a Longhorn StorageClass → sized from its request.
func (r *resolver) claimVolume(ctx context.Context, namespace, claimName string) (podVolume, bool, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: claimName}, pvc, client.UnsafeDisableDeepCopy); err != nil {
		if apierrors.IsNotFound(err) {
			return podVolume{}, false, fmt.Errorf("persistentvolumeclaim %s/%s not found", namespace, claimName)
		}
		return podVolume{}, false, fmt.Errorf("getting persistentvolumeclaim %s/%s: %w", namespace, claimName, err)
	}
	if pvc.Spec.VolumeName != "" {
		pv := &corev1.PersistentVolume{}
		if err := r.client.Get(ctx, types.NamespacedName{Name: pvc.Spec.VolumeName}, pv, client.UnsafeDisableDeepCopy); err != nil {
			return podVolume{}, false, fmt.Errorf("getting persistentvolume %s: %w", pvc.Spec.VolumeName, err)
		}
		if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != CSIDriver {
			return podVolume{}, false, nil
		}
		return r.longhornVolume(ctx, pv.Spec.CSI.VolumeHandle)
	}
	if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName == "" {
		return podVolume{}, false, nil
	}
	sc := &storagev1.StorageClass{}
	if err := r.client.Get(ctx, types.NamespacedName{Name: *pvc.Spec.StorageClassName}, sc, client.UnsafeDisableDeepCopy); err != nil {
		if apierrors.IsNotFound(err) {
			return podVolume{}, false, nil
		}
		return podVolume{}, false, fmt.Errorf("getting storageclass %s: %w", *pvc.Spec.StorageClassName, err)
	}
	if sc.Provisioner != CSIDriver {
		return podVolume{}, false, nil
	}
	k, err := classKind(sc.Parameters)
	if err != nil {
		return podVolume{}, false, fmt.Errorf("storageclass %s of persistentvolumeclaim %s/%s: %w", sc.Name, namespace, claimName, err)
	}
	size := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	return podVolume{
		Shared:       slices.Contains(pvc.Spec.AccessModes, corev1.ReadWriteMany) && sc.Parameters[paramMigratable] != "true",
		Name:         "pvc-" + string(pvc.UID),
		Size:         size.Value(),
		NodeSelector: splitTags(sc.Parameters[paramNodeSelector]),
		DiskSelector: splitTags(sc.Parameters[paramDiskSelector]),
		kind:         k,
	}, true, nil
}

// longhornVolume returns the named Longhorn Volume with its kind and its
// replicas (looked up by the replicas' spec.volumeName).
func (r *resolver) longhornVolume(ctx context.Context, name string) (podVolume, bool, error) {
	vol := &lhv1.Volume{}
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: r.namespace, Name: name}, vol, client.UnsafeDisableDeepCopy); err != nil {
		if apierrors.IsNotFound(err) {
			return podVolume{}, false, fmt.Errorf("longhorn volume %s not found", name)
		}
		return podVolume{}, false, fmt.Errorf("getting longhorn volume %s: %w", name, err)
	}
	out := podVolume{Name: name, Size: vol.Spec.Size, NodeSelector: vol.Spec.NodeSelector,
		DiskSelector: vol.Spec.DiskSelector, ReplicaNodes: map[string]bool{}, HealthyNodes: map[string]bool{}, kind: volumeKind(vol),
		Shared: vol.Spec.AccessMode == lhv1.AccessModeReadWriteMany && !vol.Spec.Migratable}
	replicas := &lhv1.ReplicaList{}
	if err := r.client.List(ctx, replicas, client.InNamespace(r.namespace), client.MatchingFields{index.ReplicaByVolume: name},
		client.UnsafeDisableDeepCopy); err != nil {
		return podVolume{}, false, fmt.Errorf("listing the replicas of volume %s: %w", name, err)
	}
	for i := range replicas.Items {
		rep := &replicas.Items[i]
		if rep.DeletionTimestamp.IsZero() && rep.Spec.NodeID != "" {
			out.ReplicaNodes[rep.Spec.NodeID] = true
			if rep.Spec.FailedAt == "" {
				out.Replicas = append(out.Replicas, placement.Replica{NodeID: rep.Spec.NodeID, DiskUUID: rep.Spec.DiskID, Healthy: true})
			}
			if rep.Spec.FailedAt == "" && rep.Spec.HealthyAt != "" && !rep.Spec.EvictionRequested {
				out.HealthyNodes[rep.Spec.NodeID] = true
			}
		}
	}
	if len(replicas.Items) > 0 {
		switch {
		case vol.Status.Robustness == lhv1.VolumeRobustnessDegraded || vol.Status.Robustness == lhv1.VolumeRobustnessFaulted:
			// (A detached volume's robustness is unknown: attached on the
			// pod's node, a healthy one gets its local replica.)
			out.NoLocalReplica = fmt.Sprintf("volume %s is %s, not healthy: Longhorn creates no local replica for it now", name, vol.Status.Robustness)
		case vol.Spec.MigrationNodeID != "" || vol.Status.CurrentMigrationNodeID != "":
			out.NoLocalReplica = fmt.Sprintf("volume %s is migrating: Longhorn creates no local replica for it now", name)
		}
	}
	return out, true, nil
}

// noLocalReplica says why Longhorn will not create a local replica of the
// best-effort volume v on its pod's node under sched, or "": with
// concurrent-replica-rebuild-per-node-limit 0, Longhorn creates no replica
// of a volume once it has replicas, and places a new volume's replicas
// before it is attached, wherever its scheduler finds room.
func noLocalReplica(v podVolume, sched settings.Scheduling) string {
	if v.DataLocality != lhv1.DataLocalityBestEffort || sched.ConcurrentReplicaRebuildPerNodeLimit != 0 {
		return ""
	}
	return fmt.Sprintf("volume %s: %s is 0, so Longhorn creates no local replica for it", v.Name, settings.ConcurrentReplicaRebuildPerNodeLimit)
}

// splitTags parses a StorageClass tag list ("ssd,fast").
func splitTags(s string) []string {
	var out []string
	for _, t := range strings.Split(s, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}
