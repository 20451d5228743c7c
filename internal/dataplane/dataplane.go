package dataplane

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	longhornv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

// CSIDriver is the Longhorn CSI driver's name: the provisioner of Longhorn
// StorageClasses and the driver of Longhorn PersistentVolumes.
const CSIDriver = "driver.longhorn.io"

// ExtendedResource is the extended resource pods request to be sent to the
// scheduler extender; every simulated node offers some.
const ExtendedResource corev1.ResourceName = "longhorn.io/scheduler-extender"

// StorageClass parameters of the Longhorn CSI driver that shape a Volume.
const (
	ParamNumberOfReplicas = "numberOfReplicas"
	ParamDataLocality     = "dataLocality"
	ParamNodeSelector     = "nodeSelector"
	ParamDiskSelector     = "diskSelector"
	ParamBackingImage     = "backingImage"
)

// SourceParamSize is the BackingImage source parameter that declares the
// image's size, a quantity.
const SourceParamSize = "size"

// DefaultAllocatable returns what a simulated node offers when Options
// leaves it unset: 64 CPUs, 256Gi of memory, 250 pods and 100 of the
// scheduler extender's resource.
func DefaultAllocatable() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("250"),
		ExtendedResource:      resource.MustParse("100"),
	}
}

// Options configures the data plane.
type Options struct {
	// Namespace is the system namespace of the longhorn.io objects.
	Namespace string
	// Nodes names the simulated Kubernetes Nodes whose kubelet the data
	// plane plays. Nodes not named here are left alone.
	Nodes []string
	// Allocatable is each simulated node's capacity and allocatable; nil is
	// DefaultAllocatable.
	Allocatable corev1.ResourceList
}

// Setup registers the data plane's indexes and controllers with mgr, whose
// cache must cover every namespace and whose credentials must be an
// administrator's.
func Setup(mgr ctrl.Manager, opts Options) error {
	if opts.Namespace == "" {
		return fmt.Errorf("the data plane needs the system namespace")
	}
	if opts.Allocatable == nil {
		opts.Allocatable = DefaultAllocatable()
	}
	if err := registerIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	nodes := map[string]bool{}
	for _, n := range opts.Nodes {
		nodes[n] = true
	}
	c := mgr.GetClient()
	r := resolver{client: c, namespace: opts.Namespace}
	controllers := []interface{ SetupWithManager(ctrl.Manager) error }{
		&Kubelet{client: c, resolver: r, nodes: nodes, allocatable: opts.Allocatable},
		&Provisioner{client: c, resolver: r, namespace: opts.Namespace},
		&Attacher{client: c, resolver: r},
		&Replicas{client: c},
		&BackingImages{client: c},
	}
	for _, ctl := range controllers {
		if err := ctl.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up %T: %w", ctl, err)
		}
	}
	return nil
}

// Cache field indexes of the data plane.
const (
	// podByClaim indexes Pods by "namespace/claim" of each claim they use.
	podByClaim = "dataplane.pod.claims"
	// pvByVolume indexes Longhorn PersistentVolumes by volume handle.
	pvByVolume = "dataplane.pv.volumeHandle"
	// claimByClass indexes unbound claims by storage class name.
	claimByClass = "dataplane.pvc.unboundStorageClass"
	// replicaByVolume indexes Replicas by spec.volumeName.
	replicaByVolume = "dataplane.replica.volumeName"
)

func registerIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	indexes := []struct {
		obj     client.Object
		field   string
		extract client.IndexerFunc
	}{
		{&corev1.Pod{}, podByClaim, func(o client.Object) []string {
			pod := o.(*corev1.Pod)
			var out []string
			for _, claim := range claimNames(pod) {
				out = append(out, pod.Namespace+"/"+claim)
			}
			return out
		}},
		{&corev1.PersistentVolume{}, pvByVolume, func(o client.Object) []string {
			if h := volumeHandle(o.(*corev1.PersistentVolume)); h != "" {
				return []string{h}
			}
			return nil
		}},
		{&corev1.PersistentVolumeClaim{}, claimByClass, func(o client.Object) []string {
			pvc := o.(*corev1.PersistentVolumeClaim)
			if pvc.Spec.VolumeName != "" || pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName == "" {
				return nil
			}
			return []string{*pvc.Spec.StorageClassName}
		}},
		{&longhornv1.Replica{}, replicaByVolume, func(o client.Object) []string {
			if v := o.(*longhornv1.Replica).Spec.VolumeName; v != "" {
				return []string{v}
			}
			return nil
		}},
	}
	for _, ix := range indexes {
		if err := indexer.IndexField(ctx, ix.obj, ix.field, ix.extract); err != nil {
			return fmt.Errorf("indexing %T by %s: %w", ix.obj, ix.field, err)
		}
	}
	return nil
}

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

// podIsLive reports whether a pod still uses its volumes: not being
// deleted and not finished.
func podIsLive(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp.IsZero() && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

// resolver follows pod → claim → PersistentVolume → Longhorn Volume and back
// through the cache.
type resolver struct {
	client    client.Reader
	namespace string
}

// claimVolume returns the Longhorn volume backing a bound claim, or "" when
// the claim is missing, unbound or not Longhorn's.
func (r resolver) claimVolume(ctx context.Context, namespace, claim string) (string, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: claim}, pvc); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	if pvc.Spec.VolumeName == "" {
		return "", nil
	}
	pv := &corev1.PersistentVolume{}
	if err := r.client.Get(ctx, types.NamespacedName{Name: pvc.Spec.VolumeName}, pv); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	return volumeHandle(pv), nil
}

// podVolumes returns the Longhorn volumes a pod uses through bound claims.
func (r resolver) podVolumes(ctx context.Context, pod *corev1.Pod) ([]string, error) {
	var out []string
	for _, claim := range claimNames(pod) {
		vol, err := r.claimVolume(ctx, pod.Namespace, claim)
		if err != nil {
			return nil, err
		}
		if vol != "" {
			out = append(out, vol)
		}
	}
	return out, nil
}

// volumeClaims returns the claims bound to the PersistentVolumes of a
// Longhorn volume, as "namespace/name" keys.
func (r resolver) volumeClaims(ctx context.Context, volume string) ([]types.NamespacedName, error) {
	pvs := &corev1.PersistentVolumeList{}
	if err := r.client.List(ctx, pvs, client.MatchingFields{pvByVolume: volume}); err != nil {
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
func (r resolver) volumePods(ctx context.Context, volume string) ([]corev1.Pod, error) {
	claims, err := r.volumeClaims(ctx, volume)
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, claim := range claims {
		pods := &corev1.PodList{}
		if err := r.client.List(ctx, pods, client.InNamespace(claim.Namespace), client.MatchingFields{podByClaim: claim.String()}); err != nil {
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

// podRequests maps a pod to requests for the Longhorn volumes it uses.
func (r resolver) podRequests(ctx context.Context, o client.Object) []reconcile.Request {
	pod, ok := o.(*corev1.Pod)
	if !ok {
		return nil
	}
	vols, err := r.podVolumes(ctx, pod)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Resolving the volumes of a pod", "pod", client.ObjectKeyFromObject(pod))
	}
	var out []reconcile.Request
	for _, v := range vols {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: r.namespace, Name: v}})
	}
	return out
}

// volumePodRequests maps a Longhorn volume (by name) to requests for the
// pods using it.
func (r resolver) volumePodRequests(ctx context.Context, volume string) []reconcile.Request {
	pods, err := r.volumePods(ctx, volume)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Finding the pods of a volume", "volume", volume)
	}
	var out []reconcile.Request
	for _, p := range pods {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&p)})
	}
	return out
}

// requeueOnConflict turns a write conflict into a quiet retry: the object
// changed since it was read (which also triggers a reconcile), and the
// next reconcile reads it again.
func requeueOnConflict(err error) (reconcile.Result, error) {
	if apierrors.IsConflict(err) {
		return reconcile.Result{RequeueAfter: conflictRetry}, nil
	}
	return reconcile.Result{}, err
}

// conflictRetry is how soon a write that conflicted is tried again.
const conflictRetry = 100 * time.Millisecond
