package longhornmanager

import (
	"context"
	"fmt"

	lhtypes "github.com/longhorn/longhorn-manager/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// CreateManagerPod creates node's longhorn-manager pod as Longhorn's
// DaemonSet would (its app label, its node, Longhorn's data directory
// mounted with bidirectional propagation), for the sandbox's kubelet to
// run: Longhorn's node controller finds each node's manager pod by that
// label and reads its readiness and mount propagation. It also creates
// longhorn-manager's service account, which the pods Longhorn creates run
// as. Existing objects are kept.
func CreateManagerPod(ctx context.Context, kube kubernetes.Interface, namespace, node, image, dataDir string) error {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: ServiceAccount, Namespace: namespace}}
	if _, err := kube.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating service account %s: %w", ServiceAccount, err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      lhtypes.LonghornManagerDaemonSetName + "-" + node,
			Namespace: namespace,
			Labels:    lhtypes.GetManagerLabels(),
		},
		Spec: corev1.PodSpec{
			NodeName:           node,
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
		},
	}
	if _, err := kube.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating longhorn-manager's pod on %s: %w", node, err)
	}
	return nil
}
