package simcluster

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// claimNames returns the names of the claims a pod's volumes use.
func claimNames(pod *corev1.Pod) []string {
	var out []string
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			out = append(out, v.PersistentVolumeClaim.ClaimName)
		}
	}
	return out
}

// volumeHandle returns the Longhorn volume of a PersistentVolume of the
// Longhorn CSI driver, or "".
func volumeHandle(pv *corev1.PersistentVolume) string {
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != CSIDriver {
		return ""
	}
	return pv.Spec.CSI.VolumeHandle
}

// claimVolume returns the Longhorn volume backing a bound claim, or "" when
// the claim is missing, unbound or not Longhorn's.
func (s *sim) claimVolume(ctx context.Context, namespace, claim string) (string, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := s.client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: claim}, pvc); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	if pvc.Spec.VolumeName == "" {
		return "", nil
	}
	pv := &corev1.PersistentVolume{}
	if err := s.client.Get(ctx, types.NamespacedName{Name: pvc.Spec.VolumeName}, pv); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	return volumeHandle(pv), nil
}

// volumeClaims returns the claims bound to the PersistentVolumes of a
// Longhorn volume.
func (s *sim) volumeClaims(ctx context.Context, volume string) ([]types.NamespacedName, error) {
	pvs := &corev1.PersistentVolumeList{}
	if err := s.client.List(ctx, pvs, client.MatchingFields{pvByVolume: volume}); err != nil {
		return nil, fmt.Errorf("listing the PersistentVolumes of volume %s: %w", volume, err)
	}
	var out []types.NamespacedName
	for _, pv := range pvs.Items {
		if ref := pv.Spec.ClaimRef; ref != nil {
			out = append(out, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name})
		}
	}
	return out, nil
}

// volumePods returns the pods using a Longhorn volume, oldest first.
func (s *sim) volumePods(ctx context.Context, volume string) ([]corev1.Pod, error) {
	claims, err := s.volumeClaims(ctx, volume)
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, claim := range claims {
		pods := &corev1.PodList{}
		if err := s.client.List(ctx, pods, client.InNamespace(claim.Namespace), client.MatchingFields{podByClaim: claim.String()}); err != nil {
			return nil, fmt.Errorf("listing the pods of claim %s: %w", claim, err)
		}
		out = append(out, pods.Items...)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreationTimestamp.Equal(&out[j].CreationTimestamp) {
			return out[i].CreationTimestamp.Before(&out[j].CreationTimestamp)
		}
		return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name
	})
	return out, nil
}

// volumePodRequests maps a Longhorn volume (by name) to requests for the
// pods using it.
func (s *sim) volumePodRequests(ctx context.Context, volume string) []reconcile.Request {
	pods, err := s.volumePods(ctx, volume)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Finding the pods of a volume", "volume", volume)
	}
	var out []reconcile.Request
	for i := range pods {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&pods[i])})
	}
	return out
}

// claimPodRequests maps a claim to requests for the pods using it.
func (s *sim) claimPodRequests(ctx context.Context, o client.Object) []reconcile.Request {
	pods := &corev1.PodList{}
	key := o.GetNamespace() + "/" + o.GetName()
	if err := s.client.List(ctx, pods, client.InNamespace(o.GetNamespace()), client.MatchingFields{podByClaim: key}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the pods of a claim", "claim", key)
		return nil
	}
	var out []reconcile.Request
	for i := range pods.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&pods.Items[i])})
	}
	return out
}

// podVolumes returns the Longhorn volumes of pod's claims, in the order
// the pod lists them.
func (s *sim) podVolumes(ctx context.Context, pod *corev1.Pod) ([]string, error) {
	var out []string
	for _, claim := range claimNames(pod) {
		name, err := s.claimVolume(ctx, pod.Namespace, claim)
		if err != nil {
			return nil, fmt.Errorf("the volume of claim %s/%s: %w", pod.Namespace, claim, err)
		}
		if name != "" {
			out = append(out, name)
		}
	}
	return out, nil
}
