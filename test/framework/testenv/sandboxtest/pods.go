package sandboxtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/longhorn/diskschedule/test/framework/testenv"
	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
	"github.com/longhorn/diskschedule/test/infrastructure/simcluster"
)

// RunPod creates, in the default namespace, a claim named name of size of
// the sandbox's default class and a pod of the same name using it, and
// waits until the pod runs on its attached, healthy Longhorn volume. It
// returns the claim, the pod and the volume's name.
func RunPod(ctx context.Context, t testing.TB, c client.Client, name, size string) (*corev1.PersistentVolumeClaim, *corev1.Pod, string) {
	t.Helper()
	return RunPodOfClass(ctx, t, c, name, size, sandbox.StorageClassName)
}

// RunPodOfClass is RunPod with a claim of the named StorageClass.
func RunPodOfClass(ctx context.Context, t testing.TB, c client.Client, name, size, class string) (*corev1.PersistentVolumeClaim, *corev1.Pod, string) {
	t.Helper()
	pvc, pod := ClaimAndPod(name, size, class)
	for _, o := range []client.Object{pvc, pod} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	vol := simcluster.VolumeName(pvc)
	testenv.Eventually(t, ctx, 2*time.Minute, "pod "+name+" running on its attached, healthy volume", func(ctx context.Context) (bool, string, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, "", err
		}
		v := &lhv1.Volume{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: vol}, v); err != nil {
			return false, err.Error(), nil
		}
		state := fmt.Sprintf("pod %s on %q (IP %q), volume %s %s on %q", pod.Status.Phase, pod.Spec.NodeName, pod.Status.PodIP,
			v.Status.State, v.Status.Robustness, v.Status.CurrentNodeID)
		return pod.Status.Phase == corev1.PodRunning && v.Status.State == lhv1.VolumeStateAttached &&
			v.Status.Robustness == lhv1.VolumeRobustnessHealthy && v.Status.CurrentNodeID == pod.Spec.NodeName, state, nil
	})
	return pvc, pod, vol
}

// ClaimAndPod returns, in the default namespace, a claim named name of
// size of the named StorageClass and a pod of the same name using it.
func ClaimAndPod(name, size, class string) (*corev1.PersistentVolumeClaim, *corev1.Pod) {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(class),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "busybox"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name},
			}}},
		},
	}
	return pvc, pod
}

// SetClaimRequest asks for size on the claim, as a user expanding it does
// (an Update of the claim as read now), and returns how long the API server
// took to answer.
func SetClaimRequest(ctx context.Context, c client.Client, pvc *corev1.PersistentVolumeClaim, size string) (time.Duration, error) {
	fresh := &corev1.PersistentVolumeClaim{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pvc), fresh); err != nil {
		return 0, err
	}
	fresh.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse(size)
	start := time.Now()
	err := c.Update(ctx, fresh)
	return time.Since(start), err
}
