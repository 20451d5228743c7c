package simlonghorn

import (
	"context"
	"fmt"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/settings"
)

// nodeController plays Longhorn's node controller with each node's disk
// monitor: it writes the status of every simulated Longhorn Node.
type nodeController struct {
	sim *sim
}

func (c *nodeController) setup(mgr ctrl.Manager) error {
	simulated := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return c.sim.inNamespace(o) && c.sim.nodeByName[o.GetName()] != nil
	})
	return ctrl.NewControllerManagedBy(mgr).Named("simlonghorn-node").
		For(&lhv1.Node{}, builder.WithPredicates(simulated)).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return c.requests(o.GetName())
		})).
		Watches(&lhv1.Replica{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			r := o.(*lhv1.Replica)
			if !c.sim.inNamespace(r) {
				return nil
			}
			if node, ok := c.sim.diskNode[r.Spec.DiskID]; ok {
				return c.requests(node)
			}
			return c.requests(r.Spec.NodeID)
		})).
		Watches(&lhv1.BackingImage{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			bi := o.(*lhv1.BackingImage)
			if !c.sim.inNamespace(bi) {
				return nil
			}
			var out []reconcile.Request
			for uuid := range bi.Spec.DiskFileSpecMap {
				out = append(out, c.requests(c.sim.diskNode[uuid])...)
			}
			return out
		})).
		Watches(&lhv1.Setting{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if !c.sim.inNamespace(o) {
				return nil
			}
			return c.allRequests()
		})).
		Complete(reconcile.Func(c.reconcile))
}

// requests returns the request of the named simulated node, or none.
func (c *nodeController) requests(node string) []reconcile.Request {
	if c.sim.nodeByName[node] == nil {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: c.sim.namespace, Name: node}}}
}

// allRequests returns the requests of every simulated node.
func (c *nodeController) allRequests() []reconcile.Request {
	out := make([]reconcile.Request, 0, len(c.sim.nodes))
	for _, n := range c.sim.nodes {
		out = append(out, c.requests(n.Name)...)
	}
	return out
}

// reconcile reads the node, its Kubernetes Node, the settings, the replicas
// and backing images on its disks, computes the status Longhorn would
// report, and writes it with one status Update when it changed.
func (c *nodeController) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if req.Namespace != c.sim.namespace || c.sim.nodeByName[req.Name] == nil {
		return reconcile.Result{}, nil
	}
	node := &lhv1.Node{}
	if err := c.sim.client.Get(ctx, req.NamespacedName, node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	kubeNode := &corev1.Node{}
	if err := c.sim.client.Get(ctx, types.NamespacedName{Name: node.Name}, kubeNode); err != nil {
		if client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, fmt.Errorf("getting Kubernetes node %s: %w", node.Name, err)
		}
		kubeNode = nil
	}
	sched, err := c.sim.settings(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	in := nodeInput{node: node, kubeNode: kubeNode, sim: c.sim.nodeByName[node.Name], settings: sched,
		replicas: map[string][]lhv1.Replica{}, now: time.Now()}
	for _, d := range in.sim.Disks {
		list := &lhv1.ReplicaList{}
		if err := c.sim.client.List(ctx, list, client.InNamespace(c.sim.namespace), client.MatchingFields{replicaByDisk: d.UUID}); err != nil {
			return reconcile.Result{}, fmt.Errorf("listing the replicas on disk %s: %w", d.UUID, err)
		}
		in.replicas[d.UUID] = list.Items
	}
	images := &lhv1.BackingImageList{}
	if err := c.sim.client.List(ctx, images, client.InNamespace(c.sim.namespace)); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing backing images: %w", err)
	}
	in.images = images.Items

	status := nodeStatus(in)
	if apiequality.Semantic.DeepEqual(node.Status, status) {
		return reconcile.Result{}, nil
	}
	node.Status = status
	if err := c.sim.client.Status().Update(ctx, node); err != nil {
		return requeueOnConflict(fmt.Errorf("updating the status of Longhorn node %s: %w", node.Name, err))
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Updated the Longhorn node's status", "node", node.Name)
	return reconcile.Result{}, nil
}

// nodeInput is what nodeStatus computes a node's status from.
type nodeInput struct {
	node     *lhv1.Node
	kubeNode *corev1.Node // nil when missing
	sim      *NodeSpec
	settings settings.Scheduling
	// replicas are the replicas on each simulated disk, by disk UUID.
	replicas map[string][]lhv1.Replica
	images   []lhv1.BackingImage
	now      time.Time
}

// nodeStatus returns the status Longhorn's node controller writes for
// in.node: zone and region from the Kubernetes Node's labels, the Ready and
// Schedulable conditions, and one diskStatus entry per disk in the spec.
func nodeStatus(in nodeInput) lhv1.NodeStatus {
	out := *in.node.Status.DeepCopy()
	name := in.node.Name
	ready, reason, msg := kubeNodeReady(in.kubeNode, name)
	if ready {
		out.Conditions = setCondition(out.Conditions, lhv1.NodeConditionTypeReady, lhv1.ConditionStatusTrue, "",
			fmt.Sprintf("Node %v is ready", name), in.now)
	} else {
		out.Conditions = setCondition(out.Conditions, lhv1.NodeConditionTypeReady, lhv1.ConditionStatusFalse, reason, msg, in.now)
	}
	if in.kubeNode != nil {
		out.Region = in.kubeNode.Labels[corev1.LabelTopologyRegion]
		out.Zone = in.kubeNode.Labels[corev1.LabelTopologyZone]
	}
	if in.kubeNode != nil && in.kubeNode.Spec.Unschedulable && in.settings.DisableSchedulingOnCordonedNode {
		out.Conditions = setCondition(out.Conditions, lhv1.NodeConditionTypeSchedulable, lhv1.ConditionStatusFalse,
			lhv1.NodeConditionReasonKubernetesNodeCordoned, fmt.Sprintf("Node %v is cordoned", name), in.now)
	} else {
		out.Conditions = setCondition(out.Conditions, lhv1.NodeConditionTypeSchedulable, lhv1.ConditionStatusTrue, "", "", in.now)
	}

	disks := make(map[string]*lhv1.DiskStatus, len(in.node.Spec.Disks))
	for diskName, spec := range in.node.Spec.Disks {
		var prev lhv1.DiskStatus
		if p := in.node.Status.DiskStatus[diskName]; p != nil {
			prev = *p.DeepCopy()
		}
		disks[diskName] = diskStatus(in, diskName, spec, prev, ready)
	}
	out.DiskStatus = disks
	return out
}

// kubeNodeReady returns whether Longhorn counts the Kubernetes Node as
// ready, and otherwise the reason and message of the node's Ready=False.
func kubeNodeReady(kn *corev1.Node, name string) (bool, string, string) {
	if kn == nil {
		return false, lhv1.NodeConditionReasonKubernetesNodeGone,
			fmt.Sprintf("Kubernetes node missing: node %v has been removed from the cluster", name)
	}
	for _, c := range kn.Status.Conditions {
		switch c.Type {
		case corev1.NodeReady:
			if c.Status != corev1.ConditionTrue {
				return false, lhv1.NodeConditionReasonKubernetesNodeNotReady,
					fmt.Sprintf("Kubernetes node %v not ready: %v", name, c.Reason)
			}
		case corev1.NodeDiskPressure, corev1.NodePIDPressure, corev1.NodeMemoryPressure, corev1.NodeNetworkUnavailable:
			if c.Status == corev1.ConditionTrue {
				return false, lhv1.NodeConditionReasonKubernetesNodePressure,
					fmt.Sprintf("Kubernetes node %v has pressure: %v, %v", name, c.Reason, c.Message)
			}
		}
	}
	return true, "", ""
}

// diskStatus returns one disk's status: what the disk monitor measured
// (the simulated disk's UUID and size), what the node controller sums (the
// replicas and backing images scheduled there) and the Ready and
// Schedulable conditions.
func diskStatus(in nodeInput, name string, spec lhv1.DiskSpec, prev lhv1.DiskStatus, nodeReady bool) *lhv1.DiskStatus {
	st := prev
	st.DiskName, st.DiskPath, st.Type = name, spec.Path, spec.Type
	if st.Conditions == nil {
		st.Conditions = []lhv1.Condition{}
	}
	d := diskOf(in.sim, name)
	if d == nil || spec.Type == lhv1.DiskTypeBlock {
		// The disk monitor cannot read it: Longhorn reports no disk info.
		st.StorageMaximum, st.StorageAvailable, st.StorageScheduled = 0, 0, 0
		st.ScheduledReplica, st.ScheduledBackingImage = map[string]int64{}, map[string]int64{}
		st.Conditions = setCondition(st.Conditions, lhv1.DiskConditionTypeReady, lhv1.ConditionStatusFalse,
			lhv1.DiskConditionReasonNoDiskInfo, fmt.Sprintf("Disk %v(%v) on node %v is not ready: failed to get disk info", name, spec.Path, in.node.Name), in.now)
		st.Conditions = setCondition(st.Conditions, lhv1.DiskConditionTypeSchedulable, lhv1.ConditionStatusFalse,
			lhv1.DiskConditionReasonDiskNotReady, fmt.Sprintf("Disk %v (%v) on the node %v is not ready", name, spec.Path, in.node.Name), in.now)
		return &st
	}
	st.DiskUUID, st.FSType, st.DiskDriver = d.UUID, "ext4", lhv1.DiskDriverNone
	st.InstanceManagerName = instanceManagerName(in.node.Name, InstanceManagerImage)
	st.StorageMaximum, st.StorageAvailable = d.Size, d.Size

	st.ScheduledReplica, st.ScheduledBackingImage, st.StorageScheduled = map[string]int64{}, map[string]int64{}, 0
	for _, r := range in.replicas[d.UUID] {
		st.StorageScheduled += r.Spec.VolumeSize
		st.ScheduledReplica[r.Name] = r.Spec.VolumeSize
	}
	for _, bi := range in.images {
		if _, ok := bi.Spec.DiskFileSpecMap[d.UUID]; ok {
			st.StorageScheduled += bi.Status.RealSize
			st.ScheduledBackingImage[bi.Name] = bi.Status.RealSize
		}
	}

	if !nodeReady {
		reason := lhv1.DiskConditionReasonNodeNotReady
		st.Conditions = setCondition(st.Conditions, lhv1.DiskConditionTypeReady, lhv1.ConditionStatusFalse, reason,
			fmt.Sprintf("Waiting for disk %v (%v) on node %v to be ready", name, spec.Path, in.node.Name), in.now)
		st.Conditions = setCondition(st.Conditions, lhv1.DiskConditionTypeSchedulable, lhv1.ConditionStatusFalse, reason,
			fmt.Sprintf("Waiting for disk %v (%v) on node %v to be schedulable", name, spec.Path, in.node.Name), in.now)
		return &st
	}
	st.Conditions = setCondition(st.Conditions, lhv1.DiskConditionTypeReady, lhv1.ConditionStatusTrue, "",
		fmt.Sprintf("Disk %v(%v) on node %v is ready", name, spec.Path, in.node.Name), in.now)
	if why := diskPressure(st, spec, in.settings); why != "" {
		st.Conditions = setCondition(st.Conditions, lhv1.DiskConditionTypeSchedulable, lhv1.ConditionStatusFalse,
			lhv1.DiskConditionReasonDiskPressure,
			fmt.Sprintf("Disk %v (%v) on the node %v is not schedulable for more replica; %s", name, spec.Path, in.node.Name, why), in.now)
	} else {
		st.Conditions = setCondition(st.Conditions, lhv1.DiskConditionTypeSchedulable, lhv1.ConditionStatusTrue, "",
			fmt.Sprintf("Disk %v(%v) on node %v is schedulable", name, spec.Path, in.node.Name), in.now)
	}
	return &st
}

// diskOf returns the simulated disk named name of n, or nil.
func diskOf(n *NodeSpec, name string) *DiskSpec {
	for i := range n.Disks {
		if n.Disks[i].Name == name {
			return &n.Disks[i]
		}
	}
	return nil
}

// diskPressure returns why Longhorn's disk check with nothing more to place
// fails (the actual space below storage-minimal-available-percentage, or
// more scheduled than the over-provisioning limit), or "".
func diskPressure(st lhv1.DiskStatus, spec lhv1.DiskSpec, s settings.Scheduling) string {
	if st.StorageMaximum <= 0 {
		return "Storage Max must be greater than 0"
	}
	if st.StorageAvailable <= 0 {
		return "Storage Available must be greater than 0"
	}
	if !ledger.HasActualSpace(st.StorageAvailable, 0, st.StorageMaximum, s.MinimalAvailablePercentage) {
		return fmt.Sprintf("Actual space usage condition failed: CurrentAvailable = %d (StorageAvailable - Required) is less than or equal to MinimalAvailable = %d (%d%% of Storage Max).",
			st.StorageAvailable, ledger.MinimalAvailable(st.StorageMaximum, s.MinimalAvailablePercentage), s.MinimalAvailablePercentage)
	}
	limit := ledger.Limit(st.StorageMaximum, spec.StorageReserved, s.OverProvisioningPercentage)
	if !ledger.Fits(st.StorageScheduled, 0, limit) {
		return fmt.Sprintf("Scheduling space condition failed: ScheduledTotal = %d (Size + StorageScheduled) is greater than ProvisionedLimit = %d (%d%% of StorageMax - StorageReserved). ",
			st.StorageScheduled, limit, s.OverProvisioningPercentage)
	}
	return ""
}
