package simlonghorn_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/simlonghorn"
	"github.com/longhorn/diskschedule/internal/testenv"
)

// createClass creates a Longhorn StorageClass named after the namespace,
// reclaim policy Delete, and starts kube-controller-manager's volume
// controllers, which its claims go through.
func createClass(t *testing.T, ns string, params map[string]string) string {
	t.Helper()
	startVolumeControllers(t)
	class := &storagev1.StorageClass{
		ObjectMeta:           metav1.ObjectMeta{Name: ns},
		Provisioner:          simlonghorn.CSIDriver,
		Parameters:           params,
		VolumeBindingMode:    ptr.To(storagev1.VolumeBindingImmediate),
		AllowVolumeExpansion: ptr.To(true),
	}
	if err := env.Client.Create(context.Background(), class); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), class) })
	return class.Name
}

// createClaim creates a claim of sizeGi of class in ns and waits until it
// is bound; it returns the claim and its Longhorn volume's name.
func createClaim(t *testing.T, ns, name, class string, sizeGi int64) (*corev1.PersistentVolumeClaim, string) {
	t.Helper()
	ctx := context.Background()
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(class),
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: *resource.NewQuantity(sizeGi*gi, resource.BinarySI)}},
		},
	}
	if err := env.Client.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, t.Context(), 30*time.Second, "claim "+name+" bound", func(ctx context.Context) (bool, string, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
			return false, err.Error(), nil
		}
		return pvc.Status.Phase == corev1.ClaimBound && pvc.Spec.VolumeName != "", fmt.Sprintf("phase %s", pvc.Status.Phase), nil
	})
	return pvc, simlonghorn.VolumeName(pvc)
}

// createPod creates a pod on node using the claim.
func createPod(t *testing.T, ns, name, node, claim string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "app", Image: "app"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
		},
	}
	if err := env.Client.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

// podRunning waits until the pod runs.
func podRunning(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	testenv.Eventually(t, t.Context(), 30*time.Second, "pod "+pod.Name+" running", func(ctx context.Context) (bool, string, error) {
		p := &corev1.Pod{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), p); err != nil {
			return false, err.Error(), nil
		}
		return p.Status.Phase == corev1.PodRunning, string(p.Status.Phase), nil
	})
}

// getVolume reads a Longhorn volume.
func getVolume(ctx context.Context, ns, name string) (*lhv1.Volume, error) {
	v := &lhv1.Volume{}
	return v, env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, v)
}

// TestClaimToRunningPod follows a claim through kube-controller-manager's
// PV controller and the CSI driver: a Longhorn Volume shaped as Longhorn's
// CSI driver and webhook write it and a PersistentVolume the external
// provisioner stores and the PV controller binds; a pod using it attaches
// the volume to its node, the replica runs, the pod runs; expanding the
// claim, which kube-controller-manager's expander leaves to the external
// resizer, expands the volume, its replica, the PersistentVolume and the
// claim; deleting the pod and the claim (reclaim policy Delete) deletes the
// PersistentVolume and the volume.
func TestClaimToRunningPod(t *testing.T) {
	ns := env.NewNamespace(t)
	n1 := nodeName(ns, "n1")
	startSim(t, simlonghorn.Options{Namespace: ns, PlaceReplicas: true, Nodes: []simlonghorn.NodeSpec{
		{Name: n1, Disks: []simlonghorn.DiskSpec{disk("disk-1", 100)}},
	}})
	nodesReady(t, ns, n1)
	class := createClass(t, ns, map[string]string{simlonghorn.ParamNumberOfReplicas: "1"})
	pvc, volName := createClaim(t, ns, "data", class, 10)
	ctx := context.Background()

	// The volume controller of the owning longhorn-manager writes the
	// status: its owner, the node of the one simulated pod.
	var vol *lhv1.Volume
	testenv.Eventually(t, t.Context(), 20*time.Second, "volume "+volName+" owned", func(ctx context.Context) (bool, string, error) {
		v, err := getVolume(ctx, ns, volName)
		if err != nil {
			return false, err.Error(), nil
		}
		vol = v
		return v.Status.OwnerID == n1, "ownerID " + v.Status.OwnerID, nil
	})
	if vol.Spec.Size != 10*gi || vol.Spec.NumberOfReplicas != 1 || vol.Spec.Frontend != lhv1.VolumeFrontendBlockDev ||
		vol.Spec.DataEngine != lhv1.DataEngineTypeV1 || vol.Spec.DataLocality != lhv1.DataLocalityDisabled ||
		vol.Spec.AccessMode != lhv1.AccessModeReadWriteOnce || vol.Spec.Image != simlonghorn.EngineImage {
		t.Errorf("volume spec = %+v", vol.Spec)
	}
	assertRoundTrip(t, vol, "spec.size")
	pv := &corev1.PersistentVolume{}
	if err := env.Client.Get(ctx, types.NamespacedName{Name: pvc.Spec.VolumeName}, pv); err != nil {
		t.Fatal(err)
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.VolumeHandle != volName || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != pvc.UID {
		t.Errorf("PersistentVolume = %+v", pv.Spec)
	}
	// The external provisioner stored it; the PV controller bound it.
	if pv.Annotations["pv.kubernetes.io/provisioned-by"] != simlonghorn.CSIDriver || pv.Status.Phase != corev1.VolumeBound ||
		pvc.Annotations["pv.kubernetes.io/bind-completed"] != "yes" ||
		pvc.Annotations["volume.kubernetes.io/storage-provisioner"] != simlonghorn.CSIDriver {
		t.Errorf("PersistentVolume annotations %v, phase %s; claim annotations %v", pv.Annotations, pv.Status.Phase, pvc.Annotations)
	}

	pod := createPod(t, ns, "app", n1, pvc.Name)
	podRunning(t, pod)
	testenv.Eventually(t, t.Context(), 10*time.Second, "volume attached and healthy", func(ctx context.Context) (bool, string, error) {
		var err error
		if vol, err = getVolume(ctx, ns, volName); err != nil {
			return false, err.Error(), nil
		}
		return vol.Spec.NodeID == n1 && vol.Status.CurrentNodeID == n1 && vol.Status.State == lhv1.VolumeStateAttached &&
				vol.Status.Robustness == lhv1.VolumeRobustnessHealthy && condTrue(vol.Status.Conditions, lhv1.VolumeConditionTypeScheduled),
			fmt.Sprintf("spec.nodeID %q, status %+v", vol.Spec.NodeID, vol.Status), nil
	})
	rs := scheduledReplicas(t, ns, volName, 1)
	r := rs[0]
	if r.Status.CurrentState != lhv1.InstanceStateRunning || !r.Status.Started || r.Status.InstanceManagerName == "" ||
		r.Spec.DesireState != lhv1.InstanceStateRunning || r.Spec.HealthyAt == "" {
		t.Errorf("running replica = spec %+v status %+v", r.Spec, r.Status)
	}
	assertRoundTrip(t, &r, "spec.volumeSize")

	// Expansion: the claim asks for 20Gi. While a policy refuses the
	// volume's growth, as the gate refuses one its disk has no room for, the
	// claim keeps asking for more than it has, and kube-controller-manager's
	// expander leaves it to the external resizer; once the policy is gone,
	// the resizer's retry goes through.
	binding := denyUpdates(t, ns, "deny-expansion", "volumes", "object.spec.size == oldObject.spec.size",
		"simulated gate: no room to expand", vol, func(o client.Object) { o.(*lhv1.Volume).Spec.Size += 2 << 20 })
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
			return err
		}
		pvc.Spec.Resources.Requests[corev1.ResourceStorage] = *resource.NewQuantity(20*gi, resource.BinarySI)
		return env.Client.Update(ctx, pvc)
	})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, t.Context(), 30*time.Second, "kube-controller-manager's expander left the claim to the external resizer", func(ctx context.Context) (bool, string, error) {
		done, state := claimEvent(ctx, pvc, "ExternalExpanding")
		return done, state, nil
	})
	if vol, err = getVolume(ctx, ns, volName); err != nil || vol.Spec.Size != 10*gi {
		t.Errorf("the refused expansion: volume size %d (%v), want 10Gi", vol.Spec.Size, err)
	}
	if err := env.Client.Delete(ctx, binding); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, t.Context(), time.Minute, "expanded to 20Gi", func(ctx context.Context) (bool, string, error) {
		rs, err := replicasOf(ctx, ns, volName)
		if err != nil || len(rs) != 1 {
			return false, fmt.Sprintf("replicas %d %v", len(rs), err), nil
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
			return false, err.Error(), nil
		}
		n, err := getNode(ctx, ns, n1)
		if err != nil {
			return false, err.Error(), nil
		}
		capacity := pvc.Status.Capacity[corev1.ResourceStorage]
		scheduled := n.Status.DiskStatus["disk-1"].StorageScheduled
		return rs[0].Spec.VolumeSize == 20*gi && capacity.Value() == 20*gi && scheduled == 20*gi,
			fmt.Sprintf("replica %d, claim %s, node scheduled %d", rs[0].Spec.VolumeSize, capacity.String(), scheduled), nil
	})
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pv), pv); err != nil {
		t.Fatal(err)
	}
	if capacity := pv.Spec.Capacity[corev1.ResourceStorage]; capacity.Value() != 20*gi {
		t.Errorf("PersistentVolume capacity %s, want 20Gi", capacity.String())
	}

	// Reclaim policy Delete: the claim's PersistentVolume and volume go.
	if err := env.Client.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, t.Context(), 30*time.Second, "claim, PersistentVolume and volume deleted", func(ctx context.Context) (bool, string, error) {
		var left []string
		for _, obj := range []client.Object{&corev1.PersistentVolumeClaim{}, &corev1.PersistentVolume{}, &lhv1.Volume{}} {
			key := client.ObjectKeyFromObject(pvc)
			switch obj.(type) {
			case *corev1.PersistentVolume:
				key = client.ObjectKey{Name: pv.Name}
			case *lhv1.Volume:
				key = client.ObjectKey{Namespace: ns, Name: volName}
			}
			if err := env.Client.Get(ctx, key, obj); !apierrors.IsNotFound(err) {
				left = append(left, fmt.Sprintf("%T %s (%v)", obj, key, err))
			}
		}
		return len(left) == 0, fmt.Sprintf("left: %v", left), nil
	})
}

// TestRetainedClaim checks reclaim policy Retain: once its claim is
// deleted, the PV controller marks the PersistentVolume Released, and the
// PersistentVolume and the Longhorn volume stay.
func TestRetainedClaim(t *testing.T) {
	ns := env.NewNamespace(t)
	n1 := nodeName(ns, "n1")
	startSim(t, simlonghorn.Options{Namespace: ns, PlaceReplicas: true, Nodes: []simlonghorn.NodeSpec{
		{Name: n1, Disks: []simlonghorn.DiskSpec{disk("disk-1", 100)}},
	}})
	nodesReady(t, ns, n1)
	class := createClass(t, ns, map[string]string{simlonghorn.ParamNumberOfReplicas: "1"})
	ctx := context.Background()
	sc := &storagev1.StorageClass{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: class}, sc); err != nil {
		t.Fatal(err)
	}
	// A class's reclaim policy cannot change: a second class retains.
	retain := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: class + "-retain"}, Provisioner: sc.Provisioner, Parameters: sc.Parameters,
		ReclaimPolicy: ptr.To(corev1.PersistentVolumeReclaimRetain), VolumeBindingMode: sc.VolumeBindingMode,
	}
	if err := env.Client.Create(ctx, retain); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), retain) })
	pvc, volName := createClaim(t, ns, "data", retain.Name, 10)
	if err := env.Client.Delete(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	pv := &corev1.PersistentVolume{}
	testenv.Eventually(t, t.Context(), 30*time.Second, "PersistentVolume Released", func(ctx context.Context) (bool, string, error) {
		if err := env.Client.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
			return false, err.Error(), nil
		}
		return pv.Status.Phase == corev1.VolumeReleased, fmt.Sprintf("phase %s", pv.Status.Phase), nil
	})
	if _, err := getVolume(ctx, ns, volName); err != nil {
		t.Errorf("the retained claim's volume: %v", err)
	}
	// Deleting a retained PersistentVolume leaves the volume to its owner.
	if err := env.Client.Delete(ctx, pv); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, t.Context(), 30*time.Second, "PersistentVolume deleted", func(ctx context.Context) (bool, string, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(pv), &corev1.PersistentVolume{})
		return apierrors.IsNotFound(err), fmt.Sprintf("%v", err), nil
	})
	if _, err := getVolume(ctx, ns, volName); err != nil {
		t.Errorf("the retained claim's volume after its PersistentVolume went: %v", err)
	}
}

// claimEvent reports whether an Event of reason was recorded for the claim.
func claimEvent(ctx context.Context, pvc *corev1.PersistentVolumeClaim, reason string) (bool, string) {
	events := &corev1.EventList{}
	if err := env.Client.List(ctx, events, client.InNamespace(pvc.Namespace)); err != nil {
		return false, err.Error()
	}
	var seen []string
	for _, e := range events.Items {
		if e.InvolvedObject.UID == pvc.UID {
			if e.Reason == reason {
				return true, ""
			}
			seen = append(seen, e.Source.Component+"/"+e.Reason)
		}
	}
	return false, fmt.Sprintf("events of the claim: %v", seen)
}

// TestReplicasPlacedFromOwnCache checks Longhorn's way of placing replicas:
// each created unscheduled, then placed with one Update of the Replica, on
// the disk with the most free space in Longhorn's own view (the node's
// status storageScheduled), which follows every placement; node
// anti-affinity; and the replicas removed with their volume.
func TestReplicasPlacedFromOwnCache(t *testing.T) {
	ns := env.NewNamespace(t)
	n1, n2 := nodeName(ns, "n1"), nodeName(ns, "n2")
	startSim(t, simlonghorn.Options{Namespace: ns, PlaceReplicas: true, Nodes: []simlonghorn.NodeSpec{
		{Name: n1, Disks: []simlonghorn.DiskSpec{disk("disk-1", 100), disk("disk-2", 100)}},
		{Name: n2, Disks: []simlonghorn.DiskSpec{disk("disk-1", 100), disk("disk-2", 100)}},
	}})
	nodesReady(t, ns, n1, n2)
	ctx := context.Background()

	// One volume at a time, each waiting until Longhorn's own view shows
	// the previous one: every disk gets one replica.
	var total int64
	for i := range 4 {
		vol := newVolume(t, ns, fmt.Sprintf("vol-%d", i), 40, map[string]string{simlonghorn.ParamNumberOfReplicas: "1"})
		if err := env.Client.Create(ctx, vol); err != nil {
			t.Fatal(err)
		}
		r := scheduledReplicas(t, ns, vol.Name, 1)[0]
		// Created unscheduled (generation 1), then placed with one Update
		// of its spec (generation 2), as Longhorn's volume controller does.
		if r.Generation != 2 || r.Spec.DataDirectoryName == "" || r.Spec.DiskPath == "" ||
			r.Labels[simlonghorn.LabelNode] != r.Spec.NodeID || r.Labels[simlonghorn.LabelDiskUUID] != r.Spec.DiskID ||
			r.Labels[simlonghorn.LabelVolume] != vol.Name || len(r.OwnerReferences) != 1 || r.OwnerReferences[0].Name != vol.Name {
			t.Errorf("replica %s: generation %d, spec %+v, labels %v, owners %v", r.Name, r.Generation, r.Spec, r.Labels, r.OwnerReferences)
		}
		if r.Spec.VolumeSize != 40*gi || r.Spec.EngineName == "" || r.Spec.Image != simlonghorn.EngineImage ||
			r.Spec.DataEngine != lhv1.DataEngineTypeV1 || r.Spec.DesireState != lhv1.InstanceStateStopped || !r.Spec.Active {
			t.Errorf("replica %s spec = %+v", r.Name, r.Spec)
		}
		total += 40 * gi
		waitScheduledTotal(t, ns, total, n1, n2)
	}
	perDisk := diskUsage(t, ns, n1, n2)
	for d, used := range perDisk {
		if used != 40*gi {
			t.Errorf("disk %s holds %d bytes, want one 40Gi replica on every disk: %v", d, used, perDisk)
		}
	}

	// A volume of two replicas: node anti-affinity (hard by default) puts
	// them on different nodes.
	vol := newVolume(t, ns, "vol-two", 10, map[string]string{simlonghorn.ParamNumberOfReplicas: "2"})
	if err := env.Client.Create(ctx, vol); err != nil {
		t.Fatal(err)
	}
	rs := scheduledReplicas(t, ns, vol.Name, 2)
	if rs[0].Spec.NodeID == rs[1].Spec.NodeID {
		t.Errorf("both replicas on node %s", rs[0].Spec.NodeID)
	}
	testenv.Eventually(t, t.Context(), 10*time.Second, "volume scheduled", func(ctx context.Context) (bool, string, error) {
		v, err := getVolume(ctx, ns, vol.Name)
		if err != nil {
			return false, err.Error(), nil
		}
		return condTrue(v.Status.Conditions, lhv1.VolumeConditionTypeScheduled) && v.Status.State == lhv1.VolumeStateDetached,
			fmt.Sprintf("%+v", v.Status), nil
	})
	waitScheduledTotal(t, ns, total+20*gi, n1, n2)

	// Deleting the volume deletes its replicas; the space is free again.
	if err := env.Client.Delete(ctx, vol); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, t.Context(), 10*time.Second, "replicas of the deleted volume gone", func(ctx context.Context) (bool, string, error) {
		rs, err := replicasOf(ctx, ns, vol.Name)
		return err == nil && len(rs) == 0, fmt.Sprintf("%d replicas (%v)", len(rs), err), nil
	})
	waitScheduledTotal(t, ns, total, n1, n2)

	// A volume larger than any disk's free space finds no disk.
	big := newVolume(t, ns, "vol-big", 80, map[string]string{simlonghorn.ParamNumberOfReplicas: "1"})
	if err := env.Client.Create(ctx, big); err != nil {
		t.Fatal(err)
	}
	waitUnscheduled(t, ns, big.Name, "insufficient storage")
	rs, err := replicasOf(ctx, ns, big.Name)
	if err != nil || len(rs) != 1 || rs[0].Spec.NodeID != "" {
		t.Errorf("unschedulable volume's replicas = %+v (%v), want one unscheduled", rs, err)
	}
}

// waitScheduledTotal waits until the nodes' disks report total bytes
// scheduled, summed over their status storageScheduled, and each disk's
// storageScheduled equals the sum of its scheduledReplica.
func waitScheduledTotal(t *testing.T, ns string, total int64, nodes ...string) {
	t.Helper()
	testenv.Eventually(t, t.Context(), 10*time.Second, fmt.Sprintf("%d bytes scheduled", total), func(ctx context.Context) (bool, string, error) {
		sum := int64(0)
		for _, name := range nodes {
			n, err := getNode(ctx, ns, name)
			if err != nil {
				return false, err.Error(), nil
			}
			for d, st := range n.Status.DiskStatus {
				replicas := int64(0)
				for _, size := range st.ScheduledReplica {
					replicas += size
				}
				if replicas != st.StorageScheduled {
					return false, fmt.Sprintf("%s/%s: storageScheduled %d but replicas sum to %d", name, d, st.StorageScheduled, replicas), nil
				}
				sum += st.StorageScheduled
			}
		}
		return sum == total, fmt.Sprintf("%d scheduled", sum), nil
	})
}

// diskUsage returns the bytes of replicas on each disk ("node/disk"), from
// the replicas themselves.
func diskUsage(t *testing.T, ns string, nodes ...string) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	list := &lhv1.ReplicaList{}
	if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	byUUID := map[string]int64{}
	for disk, p := range ledger.PersistedByDisk(list.Items, nil, nil) {
		byUUID[disk] = p.Total()
	}
	out := map[string]int64{}
	for _, name := range nodes {
		n, err := getNode(ctx, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		for d, st := range n.Status.DiskStatus {
			out[name+"/"+d] = byUUID[st.DiskUUID]
		}
	}
	return out
}

// TestRefusedPlacement checks a refused replica write, as the admission
// gate refuses one: a ValidatingAdmissionPolicy denies every replica
// Update that sets spec.diskID. As longhorn-manager's volume controller,
// the simulation writes nothing else of the volume in a sync whose replica
// write failed: the volume is stalled (no owner, no Scheduled condition, not
// attached) while the refusal lasts, and its replica stays unscheduled.
// After three quick retries the volume waits for the informers' resync (30
// s) or a node change; once the policy's binding is gone, that retry places
// the replica and the volume's status is written. The stall, from the first
// refusal to the placement, is bounded by the resync.
func TestRefusedPlacement(t *testing.T) {
	ns := env.NewNamespace(t)
	n1 := nodeName(ns, "n1")
	refusals := make(chan simlonghorn.RefusedWrite, 100)
	startSim(t, simlonghorn.Options{Namespace: ns, PlaceReplicas: true, Nodes: []simlonghorn.NodeSpec{
		{Name: n1, Disks: []simlonghorn.DiskSpec{disk("disk-1", 100)}},
	}, OnRefusedWrite: func(r simlonghorn.RefusedWrite) {
		select {
		case refusals <- r:
		default:
		}
	}})
	nodesReady(t, ns, n1)
	ctx := context.Background()
	const denial = "simulated gate: the disk's ledger has no room"
	binding := denyPlacement(t, ns, denial)

	vol := newVolume(t, ns, "vol-1", 10, map[string]string{simlonghorn.ParamNumberOfReplicas: "1"})
	if err := env.Client.Create(ctx, vol); err != nil {
		t.Fatal(err)
	}
	// Longhorn's queue: the first try and three quick retries, all refused.
	var first time.Time
	for i := range 4 {
		select {
		case r := <-refusals:
			if r.Volume != vol.Name || !strings.Contains(r.Err.Error(), denial) {
				t.Fatalf("refusal %d = %+v, want one of %s saying %q", i, r, vol.Name, denial)
			}
			if i == 0 {
				first = r.At
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%d refusals of %s's placement within 20s, want 4", i, vol.Name)
		}
	}
	// The stall: nothing of the volume was written since the refusals began.
	got, err := getVolume(ctx, ns, vol.Name)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.OwnerID != "" || len(got.Status.Conditions) != 0 || got.Status.State != "" {
		t.Errorf("volume status during the refusals = owner %q, state %q, conditions %+v; want nothing written",
			got.Status.OwnerID, got.Status.State, got.Status.Conditions)
	}
	rs, err := replicasOf(ctx, ns, vol.Name)
	if err != nil || len(rs) != 1 || rs[0].Spec.NodeID != "" || rs[0].Spec.DiskID != "" {
		t.Fatalf("replicas after the refusal = %+v (%v), want one unscheduled", rs, err)
	}

	// The gate lets the write through: the resync's try places it.
	if err := env.Client.Delete(ctx, binding); err != nil {
		t.Fatal(err)
	}
	scheduledReplicasWithin(t, ns, vol.Name, 1, 45*time.Second)
	testenv.Eventually(t, t.Context(), 20*time.Second, "volume scheduled and owned", func(ctx context.Context) (bool, string, error) {
		v, err := getVolume(ctx, ns, vol.Name)
		if err != nil {
			return false, err.Error(), nil
		}
		return condTrue(v.Status.Conditions, lhv1.VolumeConditionTypeScheduled) && v.Status.OwnerID == n1,
			fmt.Sprintf("owner %q, %+v", v.Status.OwnerID, v.Status.Conditions), nil
	})
	if d := time.Since(first); d > 30*time.Second+15*time.Second {
		t.Errorf("the volume was stalled %s from its first refusal, want at most the resync (30s) and some", d.Round(time.Second))
	} else {
		t.Logf("stalled %s from the first refusal to its status written", d.Round(time.Second))
	}
}

// denyPlacement installs a ValidatingAdmissionPolicy that denies, in ns,
// every replica Update setting spec.diskID, and waits until the API server
// enforces it. It returns the binding.
func denyPlacement(t *testing.T, ns, message string) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	t.Helper()
	// A probe replica of no volume (nothing owns it, so nothing removes it).
	probe := &lhv1.Replica{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns},
		Spec: lhv1.ReplicaSpec{InstanceSpec: lhv1.InstanceSpec{VolumeName: "probe", DataEngine: lhv1.DataEngineTypeV1,
			DesireState: lhv1.InstanceStateStopped}},
	}
	if err := env.Client.Create(context.Background(), probe); err != nil {
		t.Fatal(err)
	}
	return denyUpdates(t, ns, "deny-placement", "replicas", `object.spec.diskID == "" || object.spec.diskID == oldObject.spec.diskID`,
		message, probe, func(o client.Object) { o.(*lhv1.Replica).Spec.DiskID = "probe-disk" })
}

// denyUpdates installs a ValidatingAdmissionPolicy named after ns and name
// that denies, in ns, every Update of the Longhorn resource for which the
// CEL expression is false, with message, and waits until the API server
// enforces it: a dry-run Update of probe, changed by change, is refused. It
// returns the binding; deleting it lifts the policy.
func denyUpdates(t *testing.T, ns, name, resource, expression, message string, probe client.Object, change func(client.Object)) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	t.Helper()
	ctx := context.Background()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{lhv1.SchemeGroupVersion.Group},
						APIVersions: []string{lhv1.SchemeGroupVersion.Version}, Resources: []string{resource}},
				}}},
			},
			Validations: []admissionregistrationv1.Validation{{Expression: expression, Message: message}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: policy.Name, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	for _, o := range []client.Object{policy, binding} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = client.IgnoreNotFound(env.Client.Delete(ctx, binding))
		_ = client.IgnoreNotFound(env.Client.Delete(ctx, policy))
	})
	testenv.Eventually(t, t.Context(), 20*time.Second, "the policy "+policy.Name+" enforced", func(ctx context.Context) (bool, string, error) {
		p := probe.DeepCopyObject().(client.Object)
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(probe), p); err != nil {
			return false, err.Error(), nil
		}
		change(p)
		err := env.Client.Update(ctx, p, client.DryRunAll)
		return apierrors.IsInvalid(err) || apierrors.IsForbidden(err), fmt.Sprintf("dry-run update: %v", err), nil
	})
	return binding
}

// waitUnscheduled waits until the volume reports Scheduled=False with
// reason ReplicaSchedulingFailure and a message containing why.
func waitUnscheduled(t *testing.T, ns, volume, why string) {
	t.Helper()
	testenv.Eventually(t, t.Context(), 20*time.Second, volume+" unschedulable: "+why, func(ctx context.Context) (bool, string, error) {
		v, err := getVolume(ctx, ns, volume)
		if err != nil {
			return false, err.Error(), nil
		}
		c := cond(v.Status.Conditions, lhv1.VolumeConditionTypeScheduled)
		return c.Status == lhv1.ConditionStatusFalse && c.Reason == lhv1.VolumeConditionReasonReplicaSchedulingFailure &&
			strings.Contains(c.Message, why), fmt.Sprintf("%+v", c), nil
	})
}
