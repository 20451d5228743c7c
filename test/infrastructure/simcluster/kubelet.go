package simcluster

import (
	"context"
	"fmt"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// nodeStatusReportFrequency is how often the kubelet reports an unchanged
// node status (its Ready condition's heartbeat), as the kubelet's
// nodeStatusReportFrequency defaults to; the node's Lease is its frequent
// heartbeat.
const nodeStatusReportFrequency = 5 * time.Minute

// kubelet plays the kubelet of every simulated node: the Kubernetes Node's
// status and its heartbeat, pod status and the end of pod deletion. The
// node's Lease is nodeLeases' job. The kubelet of a node that went down
// (Options.Outages) does nothing more.
type kubelet struct {
	sim *sim
	// ips hands out the IPs of pods that get one of their own (pods.go).
	ips *podIPs
	// writes runs the writes pods' annotations ask for (writes.go).
	writes *writers
}

func (k *kubelet) setup(mgr ctrl.Manager) error {
	k.ips = newPodIPs(k.sim.nodeIPs)
	if k.sim.writer != nil {
		w, err := newWriters(mgr, k.sim, k.sim.writer)
		if err != nil {
			return err
		}
		k.writes = w
	}
	simulated := predicate.NewPredicateFuncs(func(o client.Object) bool { return k.sim.nodeByName[o.GetName()] != nil })
	if err := ctrl.NewControllerManagedBy(mgr).Named("simcluster-kubelet-node").
		For(&corev1.Node{}, builder.WithPredicates(simulated)).
		Complete(reconcile.Func(k.reconcileNode)); err != nil {
		return err
	}
	onSimulatedNode := predicate.NewPredicateFuncs(func(o client.Object) bool {
		pod, ok := o.(*corev1.Pod)
		return ok && k.sim.nodeByName[pod.Spec.NodeName] != nil
	})
	return ctrl.NewControllerManagedBy(mgr).Named("simcluster-kubelet-pod").
		For(&corev1.Pod{}, builder.WithPredicates(onSimulatedNode)).
		Watches(&corev1.PersistentVolumeClaim{}, handler.EnqueueRequestsFromMapFunc(k.sim.claimPodRequests)).
		Watches(&lhv1.Volume{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return k.sim.volumePodRequests(ctx, o.GetName())
		})).
		Watches(&lhv1.Replica{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return k.sim.volumePodRequests(ctx, o.(*lhv1.Replica).Spec.VolumeName)
		})).
		Complete(reconcile.Func(k.reconcilePod))
}

// reconcileNode keeps a simulated node Ready with its allocatable
// resources and reports its status again once nodeStatusReportFrequency
// passed since the last heartbeat, as the kubelet does. The not-ready taint
// the API server gives new nodes is the node lifecycle controller's to
// remove. It writes with Update, so a change made meanwhile conflicts and
// is looked at again.
func (k *kubelet) reconcileNode(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if k.sim.outages.Down(req.Name) {
		return reconcile.Result{}, nil
	}
	node := &corev1.Node{}
	if err := k.sim.client.Get(ctx, req.NamespacedName, node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	now := time.Now()
	if due := nodeStatusDue(node, k.sim.allocatable, now); due > 0 {
		return reconcile.Result{RequeueAfter: due}, nil
	}
	setNodeReady(node, k.sim.allocatable, metav1.NewTime(now))
	if ip := k.sim.nodeIPs[node.Name]; ip != "" {
		node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}, {Type: corev1.NodeHostName, Address: node.Name}}
	}
	if err := k.sim.client.Status().Update(ctx, node); err != nil {
		return requeueOnConflict(fmt.Errorf("reporting the status of node %s: %w", node.Name, err))
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Reported the simulated node Ready", "node", klog.KObj(node))
	return reconcile.Result{RequeueAfter: nodeStatusReportFrequency}, nil
}

// nodeStatusDue returns how long the node's reported status stays current:
// zero when it must be reported now (not Ready, other capacity or
// allocatable, or a heartbeat older than nodeStatusReportFrequency).
func nodeStatusDue(node *corev1.Node, allocatable corev1.ResourceList, now time.Time) time.Duration {
	if !apiequality.Semantic.DeepEqual(node.Status.Allocatable, allocatable) ||
		!apiequality.Semantic.DeepEqual(node.Status.Capacity, allocatable) {
		return 0
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			return max(c.LastHeartbeatTime.Add(nodeStatusReportFrequency).Sub(now), 0)
		}
	}
	return 0
}

// setNodeReady sets the status a kubelet reports for a healthy node: its
// capacity and allocatable, and Ready with a heartbeat at now (its
// transition time kept while it stays Ready).
func setNodeReady(node *corev1.Node, allocatable corev1.ResourceList, now metav1.Time) {
	node.Status.Capacity = allocatable.DeepCopy()
	node.Status.Allocatable = allocatable.DeepCopy()
	ready := corev1.NodeCondition{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "simulated by the diskschedule sandbox", LastHeartbeatTime: now, LastTransitionTime: now,
	}
	conds := []corev1.NodeCondition{}
	for _, c := range node.Status.Conditions {
		if c.Type != corev1.NodeReady {
			conds = append(conds, c)
		} else if c.Status == corev1.ConditionTrue {
			ready.LastTransitionTime = c.LastTransitionTime
		}
	}
	node.Status.Conditions = append([]corev1.NodeCondition{ready}, conds...)
}

// reconcilePod finishes the deletion of a pod of a simulated node, as the
// kubelet does once its containers stopped, and marks a pending pod Running
// once its Longhorn volumes are attached to its node with a running replica.
func (k *kubelet) reconcilePod(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pod := &corev1.Pod{}
	if err := k.sim.client.Get(ctx, req.NamespacedName, pod); err != nil {
		if apierrors.IsNotFound(err) {
			if k.ips != nil {
				k.ips.release(req.NamespacedName)
			}
			k.writes.stop(req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if k.sim.nodeByName[pod.Spec.NodeName] == nil || k.sim.outages.Down(pod.Spec.NodeName) {
		return reconcile.Result{}, nil
	}
	if !pod.DeletionTimestamp.IsZero() {
		k.writes.stop(req.NamespacedName)
		err := k.sim.client.Delete(ctx, pod, client.GracePeriodSeconds(0), client.Preconditions{UID: &pod.UID})
		if client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, fmt.Errorf("deleting terminated pod %s: %w", req, err)
		}
		return reconcile.Result{}, nil
	}
	if pod.Status.Phase == corev1.PodRunning {
		if err := k.writes.start(ctx, pod, k.sim.podVolumes); err != nil {
			return reconcile.Result{}, err
		}
		return k.probeReadiness(ctx, pod)
	}
	if pod.Status.Phase != corev1.PodPending && pod.Status.Phase != "" {
		return reconcile.Result{}, nil
	}
	ready, err := k.volumesReady(ctx, pod)
	if err != nil || !ready {
		return reconcile.Result{}, err
	}
	ip, err := k.podIP(pod)
	if err != nil {
		return reconcile.Result{}, err
	}
	base := pod.DeepCopy()
	setPodStarted(pod, k.sim.nodeIPs[pod.Spec.NodeName], ip, metav1.Now())
	if err := k.sim.client.Status().Patch(ctx, pod, client.StrategicMergeFrom(base)); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	ctrl.LoggerFrom(ctx).Info("Started the pod", "pod", klog.KObj(pod), "node", pod.Spec.NodeName, "ip", ip)
	if err := k.writes.start(ctx, pod, k.sim.podVolumes); err != nil {
		return reconcile.Result{}, err
	}
	return k.probeReadiness(ctx, pod)
}

// volumesReady reports whether every claim of the pod is bound and every
// Longhorn volume among them is attached to the pod's node with a running
// replica, as a volume must be before the kubelet can mount it. An RWX
// volume that is not migratable is attached on its share manager's node
// instead, and is ready once its share is available there
// (shareAvailable), as Longhorn's CSI node server waits for before it
// mounts the share's NFS endpoint.
func (k *kubelet) volumesReady(ctx context.Context, pod *corev1.Pod) (bool, error) {
	for _, claim := range claimNames(pod) {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := k.sim.client.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: claim}, pvc); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		if pvc.Spec.VolumeName == "" {
			return false, nil
		}
		name, err := k.sim.claimVolume(ctx, pod.Namespace, claim)
		if err != nil || name == "" {
			return false, err // a non-Longhorn claim is ready once bound; a missing PV is not
		}
		vol := &lhv1.Volume{}
		if err := k.sim.client.Get(ctx, client.ObjectKey{Namespace: k.sim.namespace, Name: name}, vol); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		if sharedVolume(vol) {
			if !shareAvailable(vol) {
				return false, nil
			}
		} else if vol.Status.CurrentNodeID != pod.Spec.NodeName || vol.Status.State != lhv1.VolumeStateAttached {
			return false, nil
		}
		replicas := &lhv1.ReplicaList{}
		if err := k.sim.client.List(ctx, replicas, client.InNamespace(vol.Namespace), client.MatchingFields{replicaByVolume: vol.Name}); err != nil {
			return false, fmt.Errorf("listing the replicas of volume %s: %w", vol.Name, err)
		}
		running := false
		for _, r := range replicas.Items {
			running = running || r.Status.CurrentState == lhv1.InstanceStateRunning
		}
		if !running {
			return false, nil
		}
	}
	return true, nil
}

// sharedVolume reports whether vol is served by a share manager: RWX and
// not migratable (Longhorn's isRegularRWXVolume).
func sharedVolume(vol *lhv1.Volume) bool {
	return vol.Spec.AccessMode == lhv1.AccessModeReadWriteMany && !vol.Spec.Migratable
}

// shareAvailable reports whether the share of an RWX volume can be mounted,
// as Longhorn v1.12.0's CSI node server requires before it mounts it
// (csi/node_server.go NodeStageVolume): the volume attached (on its share
// manager's node, whichever that is) and its share manager running with
// its endpoint set (isVolumeShareAvailable).
func shareAvailable(vol *lhv1.Volume) bool {
	return vol.Status.State == lhv1.VolumeStateAttached && vol.Status.ShareState == lhv1.ShareManagerStateRunning && vol.Status.ShareEndpoint != ""
}

// setPodRunning sets the status a kubelet reports once every container started.
func setPodRunning(pod *corev1.Pod, now metav1.Time) {
	pod.Status.Phase = corev1.PodRunning
	if pod.Status.StartTime == nil {
		pod.Status.StartTime = &now
	}
	for _, typ := range []corev1.PodConditionType{corev1.PodInitialized, corev1.PodReadyToStartContainers, corev1.ContainersReady, corev1.PodReady} {
		setPodCondition(pod, corev1.PodCondition{Type: typ, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	pod.Status.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
}

func setPodCondition(pod *corev1.Pod, cond corev1.PodCondition) {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == cond.Type {
			if pod.Status.Conditions[i].Status != cond.Status {
				pod.Status.Conditions[i] = cond
			}
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, cond)
}
