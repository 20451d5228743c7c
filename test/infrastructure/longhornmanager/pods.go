package longhornmanager

import (
	"context"
	"fmt"

	lhtypes "github.com/longhorn/longhorn-manager/types"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// CreateManagerPod creates node's longhorn-manager pod as Longhorn's
// DaemonSet would (its app label, its node, Longhorn's data directory
// mounted with bidirectional propagation, the DaemonSet as its
// controller), for the sandbox's kubelet to run: Longhorn's node
// controller finds each node's manager pod by that label and reads its
// readiness and mount propagation, and a drain leaves it, as
// kubectl drain --ignore-daemonsets does. It also creates
// longhorn-manager's service account, which the pods Longhorn creates run
// as, and the DaemonSet object itself (kube-controller-manager's DaemonSet
// controller does not run in the sandbox, so the object only owns the
// pods). Existing objects are kept.
func CreateManagerPod(ctx context.Context, kube kubernetes.Interface, namespace, node, image, dataDir string) error {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: ServiceAccount, Namespace: namespace}}
	if _, err := kube.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating service account %s: %w", ServiceAccount, err)
	}
	spec := managerPodSpec(image, dataDir)
	ds, err := managerDaemonSet(ctx, kube, namespace, spec)
	if err != nil {
		return err
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            lhtypes.LonghornManagerDaemonSetName + "-" + node,
			Namespace:       namespace,
			Labels:          lhtypes.GetManagerLabels(),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ds, appsv1.SchemeGroupVersion.WithKind("DaemonSet"))},
		},
		Spec: spec,
	}
	pod.Spec.NodeName = node
	if _, err := kube.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating longhorn-manager's pod on %s: %w", node, err)
	}
	return nil
}

// managerPodSpec is the longhorn-manager pod's spec, without its node.
func managerPodSpec(image, dataDir string) corev1.PodSpec {
	return corev1.PodSpec{
		ServiceAccountName: ServiceAccount,
		Containers: []corev1.Container{{
			Name:  lhtypes.LonghornManagerDaemonSetName,
			Image: image,
			VolumeMounts: []corev1.VolumeMount{{
				Name: "longhorn", MountPath: dataDir, MountPropagation: ptr.To(corev1.MountPropagationBidirectional),
			}},
			SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
		}},
		Volumes: []corev1.Volume{{
			Name:         "longhorn",
			VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dataDir}},
		}},
	}
}

// managerDaemonSet returns Longhorn's longhorn-manager DaemonSet, created
// with spec as its template unless it exists.
func managerDaemonSet(ctx context.Context, kube kubernetes.Interface, namespace string, spec corev1.PodSpec) (*appsv1.DaemonSet, error) {
	labels := lhtypes.GetManagerLabels()
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: lhtypes.LonghornManagerDaemonSetName, Namespace: namespace, Labels: labels},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
	created, err := kube.AppsV1().DaemonSets(namespace).Create(ctx, ds, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = kube.AppsV1().DaemonSets(namespace).Get(ctx, ds.Name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("creating longhorn-manager's DaemonSet: %w", err)
	}
	return created, nil
}
