package dataplane_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	longhornv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/dataplane"
)

func TestKubeletKeepsNodesReady(t *testing.T) {
	ctx := context.Background()
	c := env.Client
	name := simulatedNodes[0]
	if err := c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	ready := func(ctx context.Context) (bool, string, error) {
		n := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			return false, "", err
		}
		isReady := false
		for _, cond := range n.Status.Conditions {
			isReady = isReady || cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue
		}
		for _, taint := range n.Spec.Taints {
			if taint.Key == corev1.TaintNodeNotReady {
				return false, "tainted not-ready", nil
			}
		}
		ext := n.Status.Allocatable[dataplane.ExtendedResource]
		return isReady && ext.Value() == 100, fmt.Sprintf("ready %v, allocatable %v", isReady, n.Status.Allocatable), nil
	}
	eventually(t, "the new node is Ready, untainted, with the extender's resource", ready)

	// Something resets the status: the kubelet puts it back.
	n := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
		t.Fatal(err)
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "Test"}}
	n.Status.Allocatable = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}
	if err := c.Status().Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the reset node is Ready again", ready)

	// A node that is not simulated is left alone.
	other := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "not-simulated"}}
	if err := c.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the simulated node's status settled", ready)
	if err := c.Get(ctx, client.ObjectKeyFromObject(other), other); err != nil {
		t.Fatal(err)
	}
	if len(other.Status.Conditions) != 0 {
		t.Errorf("a node that is not simulated got conditions %v", other.Status.Conditions)
	}
}

// TestVolumeLifecycle plays kube-scheduler (binding the pod) and the
// manager (placing the replica and granting it) and checks the data
// plane's part: provision, bind, attach, start, run, expand, detach, reclaim.
func TestVolumeLifecycle(t *testing.T) {
	ctx := context.Background()
	c := env.Client
	ns := env.NewNamespace(t)
	class := &storagev1.StorageClass{
		ObjectMeta:           metav1.ObjectMeta{Name: "lifecycle"},
		Provisioner:          dataplane.CSIDriver,
		Parameters:           map[string]string{dataplane.ParamNumberOfReplicas: "1", dataplane.ParamDataLocality: "best-effort"},
		AllowVolumeExpansion: ptr.To(true),
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(class.Name),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	// The claim first: it waits for its class.
	if err := c.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the claim is bound", func(ctx context.Context) (bool, string, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
			return false, "", err
		}
		capacity := pvc.Status.Capacity[corev1.ResourceStorage]
		return pvc.Spec.VolumeName != "" && pvc.Status.Phase == corev1.ClaimBound && capacity.String() == "1Gi",
			fmt.Sprintf("volumeName %q phase %s capacity %s", pvc.Spec.VolumeName, pvc.Status.Phase, capacity.String()), nil
	})
	volKey := client.ObjectKey{Namespace: systemNamespace, Name: "pvc-" + string(pvc.UID)}
	pv := &corev1.PersistentVolume{}
	if err := c.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
		t.Fatal(err)
	}
	if pv.Status.Phase != corev1.VolumeBound || pv.Spec.CSI == nil || pv.Spec.CSI.VolumeHandle != volKey.Name || pv.Spec.ClaimRef.UID != pvc.UID {
		t.Errorf("PersistentVolume %s: phase %s, CSI %+v, claimRef %+v", pv.Name, pv.Status.Phase, pv.Spec.CSI, pv.Spec.ClaimRef)
	}
	vol := &longhornv1.Volume{}
	if err := c.Get(ctx, volKey, vol); err != nil {
		t.Fatal(err)
	}
	if vol.Spec.Size.String() != "1Gi" || vol.Spec.NumberOfReplicas != 1 || vol.Spec.DataLocality != longhornv1.DataLocalityBestEffort || vol.Spec.NodeID != "" {
		t.Errorf("volume spec = %+v", vol.Spec)
	}

	// kube-scheduler's part: the pod is bound to a node.
	node := simulatedNodes[1]
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "app", Image: "busybox"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name},
			}}},
		},
	}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the volume is attached to the pod's node", func(ctx context.Context) (bool, string, error) {
		if err := c.Get(ctx, volKey, vol); err != nil {
			return false, "", err
		}
		return vol.Spec.NodeID == node, fmt.Sprintf("nodeID %q", vol.Spec.NodeID), nil
	})

	// The manager's part: a replica placed on a disk, then granted.
	ds := &longhornv1.DiskSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: "lifecycle-disk", Namespace: systemNamespace},
		Spec:       longhornv1.DiskScheduleSpec{Name: "disk-1", NodeID: node},
	}
	rep := &longhornv1.Replica{
		ObjectMeta: metav1.ObjectMeta{Name: vol.Name + "-r-1", Namespace: systemNamespace},
		Spec:       longhornv1.ReplicaSpec{VolumeName: vol.Name, VolumeSize: vol.Spec.Size.Value(), NodeID: node, DiskID: ds.Name},
	}
	for _, obj := range []client.Object{ds, rep} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	expectPodPhase(t, pod, corev1.PodPending) // not before its volume has a running replica
	ds.Status.Replicas = map[string]longhornv1.RequestStatus{rep.Name: {
		State: longhornv1.RequestStateScheduled, RequestedSize: rep.Spec.VolumeSize, ScheduledSize: rep.Spec.VolumeSize,
	}}
	ds.Status.StorageScheduled = rep.Spec.VolumeSize
	if err := c.Status().Update(ctx, ds); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the granted replica runs and so does the pod", func(ctx context.Context) (bool, string, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(rep), rep); err != nil {
			return false, "", err
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, "", err
		}
		return rep.Status.CurrentState == longhornv1.ReplicaStateRunning && pod.Status.Phase == corev1.PodRunning,
			fmt.Sprintf("replica %q, pod %s", rep.Status.CurrentState, pod.Status.Phase), nil
	})

	// Expansion: the volume grows first; the claim once the volume reports it.
	if err := c.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
		t.Fatal(err)
	}
	pvc.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("2Gi")
	if err := c.Update(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the volume is asked to grow", func(ctx context.Context) (bool, string, error) {
		if err := c.Get(ctx, volKey, vol); err != nil {
			return false, "", err
		}
		return vol.Spec.Size.String() == "2Gi", "size " + vol.Spec.Size.String(), nil
	})
	vol.Status.CurrentSize = resource.MustParse("2Gi")
	if err := c.Status().Update(ctx, vol); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the claim reports the new size", func(ctx context.Context) (bool, string, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
			return false, "", err
		}
		capacity := pvc.Status.Capacity[corev1.ResourceStorage]
		return capacity.String() == "2Gi", "capacity " + capacity.String(), nil
	})

	// Deleting the pod (gracefully: the kubelet finishes it) detaches the
	// volume; deleting the claim releases it and reclaims the volume.
	if err := c.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pod is gone and the volume detached", func(ctx context.Context) (bool, string, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})
		if client.IgnoreNotFound(err) != nil {
			return false, "", err
		}
		if err := c.Get(ctx, volKey, vol); err != nil {
			return false, "", err
		}
		return apierrors.IsNotFound(err) && vol.Spec.NodeID == "", fmt.Sprintf("pod gone %v, nodeID %q", apierrors.IsNotFound(err), vol.Spec.NodeID), nil
	})
	if err := c.Delete(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the claim, the PersistentVolume and the volume are gone", func(ctx context.Context) (bool, string, error) {
		var left []string
		for _, o := range []struct {
			obj client.Object
			key client.ObjectKey
		}{
			{&corev1.PersistentVolumeClaim{}, client.ObjectKeyFromObject(pvc)},
			{&corev1.PersistentVolume{}, client.ObjectKey{Name: pv.Name}},
			{&longhornv1.Volume{}, volKey},
		} {
			err := c.Get(ctx, o.key, o.obj)
			if client.IgnoreNotFound(err) != nil {
				return false, "", err
			}
			if err == nil {
				left = append(left, fmt.Sprintf("%T %s (finalizers %v)", o.obj, o.key.Name, o.obj.GetFinalizers()))
			}
		}
		return len(left) == 0, fmt.Sprint(left), nil
	})
}

// expectPodPhase checks the pod's phase now.
func expectPodPhase(t *testing.T, pod *corev1.Pod, want corev1.PodPhase) {
	t.Helper()
	got := &corev1.Pod{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != want {
		t.Errorf("pod %s is %s, want %s", pod.Name, got.Status.Phase, want)
	}
}

func TestBackingImageSize(t *testing.T) {
	ctx := context.Background()
	bi := &longhornv1.BackingImage{
		ObjectMeta: metav1.ObjectMeta{Name: "image", Namespace: systemNamespace},
		Spec:       longhornv1.BackingImageSpec{SourceType: "download", SourceParameters: map[string]string{"size": "3Gi"}},
	}
	if err := env.Client.Create(ctx, bi); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the backing image's size is read", func(ctx context.Context) (bool, string, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(bi), bi); err != nil {
			return false, "", err
		}
		return bi.Status.Size == 3<<30, fmt.Sprintf("size %d", bi.Status.Size), nil
	})
}
