package scenario

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// statefulSetName is the name of a scenario's StatefulSet; its pods are
// web-0 … web-(n-1) and their claims data-web-0 … data-web-(n-1).
const statefulSetName = "web"

// claimTemplate is the name of the StatefulSet's volume claim template.
const claimTemplate = "data"

// statefulSet returns the workload as a StatefulSet: its replicas created
// and deleted all at once (parallel pod management), each with a claim of
// the workload's class and size from the claim template, which the
// StatefulSet keeps when it is deleted or scaled down.
func (w *workload) statefulSet() *appsv1.StatefulSet {
	labels := map[string]string{"app": statefulSetName}
	pod := w.pod(w.names[0])
	spec := pod.Spec
	spec.Volumes = nil
	spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: claimTemplate, MountPath: "/" + claimTemplate}}
	claim := w.claim(claimTemplate)
	claim.Namespace = ""
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: statefulSetName, Namespace: w.o.Namespace, Labels: labels},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(int32(len(w.names))),
			ServiceName:         statefulSetName,
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       spec,
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{*claim},
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
				WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
			},
		},
	}
}

// createStatefulSet creates the workload's StatefulSet and returns when
// the creation began: kube-controller-manager's StatefulSet controller
// creates the claims (unless they exist) and the pods, and its PV
// controller binds the claims to the volumes the provisioner creates.
func (w *workload) createStatefulSet(ctx context.Context) (time.Time, error) {
	if err := ensureNamespace(ctx, w.c, w.o.Namespace); err != nil {
		return time.Time{}, err
	}
	start := time.Now()
	sts := w.statefulSet()
	if err := w.c.Create(ctx, sts); err != nil {
		return start, fmt.Errorf("creating StatefulSet %s/%s: %w", sts.Namespace, sts.Name, err)
	}
	w.o.Logf("created StatefulSet %s of %d replicas with %s claims (extender: %v, scheduler: %s); waiting for kube-controller-manager and the scheduler",
		sts.Name, len(w.names), w.size.String(), w.useExtender, w.schedulerName())
	return start, nil
}

// deleteStatefulSet deletes the workload's StatefulSet in the foreground,
// its pods with it, and waits until it and its pods are gone; the claims
// stay.
func (w *workload) deleteStatefulSet(ctx context.Context) error {
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: w.o.Namespace, Name: statefulSetName}}
	if err := w.c.Delete(ctx, sts, client.PropagationPolicy(metav1.DeletePropagationForeground)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting StatefulSet %s/%s: %w", sts.Namespace, sts.Name, err)
	}
	err := waitFor(ctx, w.o.Timeout, w.c, &appsv1.StatefulSetList{}, w.o.Namespace, func(objs objects) bool {
		_, ok := objs[w.o.Namespace+"/"+statefulSetName]
		return !ok
	})
	if err != nil {
		return fmt.Errorf("waiting until StatefulSet %s/%s is gone: %w", sts.Namespace, sts.Name, err)
	}
	if err := w.waitPodsGone(ctx, nil); err != nil {
		return err
	}
	w.o.Logf("deleted StatefulSet %s and its %d pods; the claims stay", statefulSetName, len(w.names))
	return nil
}

// waitPodsGone waits until none of the workload's pods exists, or, with
// uids, until none of those pods does (the StatefulSet controller may have
// created others of the same names meanwhile).
func (w *workload) waitPodsGone(ctx context.Context, uids map[types.UID]bool) error {
	var left []string
	err := waitFor(ctx, w.o.Timeout, w.c, &corev1.PodList{}, w.o.Namespace, func(objs objects) bool {
		left = left[:0]
		for _, name := range w.names {
			obj, ok := objs[w.o.Namespace+"/"+name]
			if ok && (uids == nil || uids[obj.GetUID()]) {
				left = append(left, name)
			}
		}
		return len(left) == 0
	})
	if err != nil {
		return fmt.Errorf("waiting until the pods are gone (left: %s): %w", strings.Join(left, ", "), err)
	}
	return nil
}

// retainVolumes sets the reclaim policy of the workload's claims' volumes
// to Retain, so that the volumes outlive their claims.
func (w *workload) retainVolumes(ctx context.Context) error {
	return w.setReclaimPolicy(ctx, corev1.PersistentVolumeReclaimRetain)
}

// setReclaimPolicy sets the reclaim policy of the workload's claims'
// volumes.
func (w *workload) setReclaimPolicy(ctx context.Context, policy corev1.PersistentVolumeReclaimPolicy) error {
	for _, pod := range w.names {
		for _, claim := range w.pods[pod] {
			pvc := &corev1.PersistentVolumeClaim{}
			if err := w.c.Get(ctx, client.ObjectKey{Namespace: w.o.Namespace, Name: claim}, pvc); err != nil {
				return fmt.Errorf("getting claim %s: %w", claim, err)
			}
			if err := setVolumeReclaimPolicy(ctx, w.c, pvc.Spec.VolumeName, policy); err != nil {
				return err
			}
		}
	}
	return nil
}

// setVolumeReclaimPolicy sets a PersistentVolume's reclaim policy.
func setVolumeReclaimPolicy(ctx context.Context, c client.Client, name string, policy corev1.PersistentVolumeReclaimPolicy) error {
	pv := &corev1.PersistentVolume{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, pv); err != nil {
		return fmt.Errorf("getting PersistentVolume %s: %w", name, err)
	}
	if pv.Spec.PersistentVolumeReclaimPolicy == policy {
		return nil
	}
	patch := client.MergeFrom(pv.DeepCopy())
	pv.Spec.PersistentVolumeReclaimPolicy = policy
	if err := c.Patch(ctx, pv, patch); err != nil {
		return fmt.Errorf("setting the reclaim policy of PersistentVolume %s to %s: %w", name, policy, err)
	}
	return nil
}

// statefulSetReady waits until the workload's StatefulSet reports every
// replica ready and returns how long after start it was first seen so, or
// 0 when it was not within the timeout.
func (w *workload) statefulSetReady(ctx context.Context, start time.Time) (time.Duration, error) {
	var took time.Duration
	want := int32(len(w.names))
	err := waitFor(ctx, w.o.Timeout, w.c, &appsv1.StatefulSetList{}, w.o.Namespace, func(objs objects) bool {
		sts, ok := objs[w.o.Namespace+"/"+statefulSetName].(*appsv1.StatefulSet)
		if !ok || sts.Status.ObservedGeneration != sts.Generation || sts.Status.ReadyReplicas != want {
			return false
		}
		took = time.Since(start)
		return true
	})
	if timedOut(ctx, err) {
		err = nil // reported in the result
	}
	if err != nil {
		return 0, fmt.Errorf("waiting until StatefulSet %s is ready: %w", statefulSetName, err)
	}
	return took, nil
}
