package longhornmanager

import (
	"context"
	"fmt"

	"github.com/longhorn/longhorn-manager/controller"
	"github.com/longhorn/longhorn-manager/engineapi"
	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhtypes "github.com/longhorn/longhorn-manager/types"
	lhutil "github.com/longhorn/longhorn-manager/util"
	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"github.com/longhorn/diskschedule/test/infrastructure/longhornpod"
)

// Controllers names the longhorn-manager controllers every Manager runs, as
// the sandbox's log lists them.
var Controllers = []string{"longhorn-volume", "longhorn-replica", "longhorn-engine"}

// DataPlaneControllers names the longhorn-manager controllers a Manager
// also runs when the sandbox simulates the data plane: those that reach the
// instance managers, read the disks, or attach volumes.
var DataPlaneControllers = []string{
	"longhorn-node", "longhorn-instance-manager", "longhorn-volume-attachment",
	"longhorn-volume-rebuilding", "longhorn-volume-eviction", "longhorn-volume-expansion",
	"longhorn-kubernetes-pv", "longhorn-kubernetes-node", "longhorn-kubernetes-pod",
	"longhorn-backing-image", "longhorn-backing-image-manager", "longhorn-backing-image-data-source",
	"longhorn-share-manager",
}

// NodeControllers names the only longhorn-manager controllers a Manager
// runs with Options.NodesOnly: those that keep the Longhorn Node, its
// disks' status and its instance managers as Longhorn does, and nothing
// that creates, places, starts or changes volumes and replicas.
//
// What they write, in longhorn-manager v1.12.0's code, and why none of it
// is a Volume or Replica a test's own writers (test/framework/testenv/
// replicawriter) create and place:
//
//   - The node controller (controller.NewNodeController, with its disk,
//     environment-check and snapshot monitors) writes its Node's status
//     (conditions; each disk's status from statfs and longhorn-disk.cfg,
//     storageScheduled and scheduledReplica counted from the replicas
//     labelled with the disk's UUID), the node's InstanceManagers, Orphans
//     of unknown replica directories, and BackingImages' disk maps. It
//     writes a Replica in two places only. syncDiskStatus rewrites a
//     replica's spec.nodeID and spec.diskPath when they differ from the
//     node and path of the disk its longhorndiskuuid label names: Longhorn's
//     scheduler sets nodeID, diskID and diskPath from one disk, and the
//     datastore's UpdateReplica labels the replica with that diskID, so they
//     agree. syncReplicaEvictionRequested sets spec.evictionRequested only
//     when the node or disk asks for eviction, or the Kubernetes node is
//     cordoned under the node drain policy, which none of the suites in
//     this mode does. It reads Volumes: its snapshot hashing acts on a
//     volume whose status.ownerID is its node, and without a volume
//     controller no volume has an owner.
//   - The instance manager controller writes InstanceManagers (status,
//     from the instance manager's gRPC API), their pods and
//     PodDisruptionBudgets, and Orphans of instances no Engine or Replica
//     names; it only reads Replicas and Engines (for the budget and the
//     orphans). No instance runs: no replica or engine controller starts
//     one.
//   - The Kubernetes node controller writes the Longhorn Node's spec
//     (default disks on labelled nodes, default tags) or deletes a Longhorn
//     Node whose Kubernetes Node is gone.
//
// The engine image stays the simulation's object (see the package doc),
// and the Settings and default BackupTarget Longhorn's daemon writes at
// start are Initialize's.
var NodeControllers = []string{"longhorn-node", "longhorn-instance-manager", "longhorn-kubernetes-node"}

// ServiceAccount is longhorn-manager's service account, which the pods it
// creates (instance managers, share managers) run as.
const ServiceAccount = "longhorn-service-account"

// Options are what a Manager runs.
type Options struct {
	// DataPlane also runs DataPlaneControllers: the node's instance manager
	// answers (test/infrastructure/dataplane) and its disks are mounted (MountDisks).
	DataPlane bool
	// NodesOnly, with DataPlane, runs NodeControllers alone: the node's
	// Longhorn Node, disks and instance managers are Longhorn's, and
	// nothing of Longhorn's creates, places or runs volumes and replicas
	// (the sandbox's --simulated-longhorn=false, where a test's own writers
	// place replicas with Longhorn's scheduler and datastore).
	NodesOnly bool
	// InstanceManagerImage is the default instance manager image, which
	// Longhorn's node controller gives the InstanceManagers it creates.
	InstanceManagerImage string
	// BackingImageManagerImage is the default backing-image manager image,
	// which Longhorn's backing image controllers run their pods with.
	BackingImageManagerImage string
	// ShareManagerImage is the share manager image (longhorn-manager's
	// --share-manager-image), which Longhorn's volume controller gives the
	// ShareManager of each RWX volume and its share manager controller
	// runs the share manager pod with.
	ShareManagerImage string
}

// runner is a Longhorn controller: its workers run until stop closes.
type runner interface {
	Run(workers int, stop <-chan struct{})
}

// Workers is how many workers each controller runs: longhorn-manager's
// controller.Workers.
const Workers = 5

// Manager is one longhorn-manager: Longhorn's datastore of its own (a
// longhornpod.Pod) and Longhorn's controllers over it, responsible for what
// Longhorn gives its node (its controller ID).
type Manager struct {
	*longhornpod.Pod
}

// Start builds node's longhorn-manager on cfg (administrator credentials, as
// longhorn-manager's service account may do all it does), waits for its
// datastore's caches, starts its controllers and runs them until ctx ends.
func Start(ctx context.Context, cfg *rest.Config, namespace, node string, log logrus.FieldLogger, opts Options) (*Manager, error) {
	if opts.NodesOnly && !opts.DataPlane {
		return nil, fmt.Errorf("longhorn-manager on %s: its node controllers alone need the data plane", node)
	}
	pod, err := longhornpod.New(cfg, namespace, node, lhtypes.KubeAPIQPS, lhtypes.KubeAPIBurst)
	if err != nil {
		return nil, err
	}
	if err := pod.Start(ctx); err != nil {
		return nil, err
	}
	controllers, err := build(pod, namespace, node, log, opts)
	if err != nil {
		return nil, err
	}
	// The controllers registered their handlers on informers that already
	// run: a shared informer hands a late handler everything it holds.
	for _, c := range controllers {
		go c.Run(Workers, ctx.Done())
	}
	return &Manager{Pod: pod}, nil
}

// build builds the controllers opts asks for over pod's datastore.
func build(pod *longhornpod.Pod, namespace, node string, log logrus.FieldLogger, opts Options) ([]runner, error) {
	kube := pod.Kube
	scheme := runtime.NewScheme()
	if err := lhv1.SchemeBuilder.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("longhorn-manager on %s: scheme: %w", node, err)
	}
	log = log.WithField("node", node)
	ds := pod.DataStore
	proxyConns := lhutil.NewAtomicCounter()
	if opts.NodesOnly {
		var out []runner
		if err := nodeControllers(log, pod, scheme, namespace, node, opts, proxyConns, collect(&out)); err != nil {
			return nil, fmt.Errorf("longhorn-manager on %s: %w", node, err)
		}
		return out, nil
	}
	volumes, err := controller.NewVolumeController(log, ds, scheme, kube, namespace, node, opts.ShareManagerImage, proxyConns)
	if err != nil {
		return nil, fmt.Errorf("longhorn-manager on %s: volume controller: %w", node, err)
	}
	replicas, err := controller.NewReplicaController(log, ds, scheme, kube, namespace, node)
	if err != nil {
		return nil, fmt.Errorf("longhorn-manager on %s: replica controller: %w", node, err)
	}
	engines, err := controller.NewEngineController(log, ds, scheme, kube, &engineapi.EngineCollection{}, namespace, node,
		proxyConns, controller.NewSnapshotConcurrentLimiter())
	if err != nil {
		return nil, fmt.Errorf("longhorn-manager on %s: engine controller: %w", node, err)
	}
	controllers := []runner{volumes, replicas, engines}
	if opts.DataPlane {
		more, err := dataPlaneControllers(log, pod, scheme, namespace, node, opts, proxyConns)
		if err != nil {
			return nil, fmt.Errorf("longhorn-manager on %s: %w", node, err)
		}
		controllers = append(controllers, more...)
	}
	return controllers, nil
}

// adder adds a controller built by one of Longhorn's constructors, or
// returns its error.
type adder func(name string, c runner, err error) error

// collect returns an adder appending to out.
func collect(out *[]runner) adder {
	return func(name string, c runner, err error) error {
		if err != nil {
			return fmt.Errorf("%s controller: %w", name, err)
		}
		*out = append(*out, c)
		return nil
	}
}

// nodeControllers builds the controllers of NodeControllers.
func nodeControllers(log logrus.FieldLogger, pod *longhornpod.Pod, scheme *runtime.Scheme, namespace, node string, opts Options, proxyConns lhutil.Counter, add adder) error {
	ds, kube := pod.DataStore, pod.Kube
	nodes, err := controller.NewNodeController(log, ds, scheme, kube, namespace, node, opts.InstanceManagerImage)
	if err := add("node", nodes, err); err != nil {
		return err
	}
	ims, err := controller.NewInstanceManagerController(log, ds, scheme, kube, namespace, node, ServiceAccount, proxyConns)
	if err := add("instance manager", ims, err); err != nil {
		return err
	}
	kubeNodes, err := controller.NewKubernetesNodeController(log, ds, scheme, kube, node)
	return add("Kubernetes node", kubeNodes, err)
}

// dataPlaneControllers builds the controllers of DataPlaneControllers.
func dataPlaneControllers(log logrus.FieldLogger, pod *longhornpod.Pod, scheme *runtime.Scheme, namespace, node string, opts Options, proxyConns lhutil.Counter) ([]runner, error) {
	ds, kube := pod.DataStore, pod.Kube
	var out []runner
	add := collect(&out)
	if err := nodeControllers(log, pod, scheme, namespace, node, opts, proxyConns, add); err != nil {
		return nil, err
	}
	attachments, err := controller.NewLonghornVolumeAttachmentController(log, ds, scheme, kube, node, namespace)
	if err := add("volume attachment", attachments, err); err != nil {
		return nil, err
	}
	rebuilding, err := controller.NewVolumeRebuildingController(log, ds, scheme, kube, node, namespace)
	if err := add("volume rebuilding", rebuilding, err); err != nil {
		return nil, err
	}
	eviction, err := controller.NewVolumeEvictionController(log, ds, scheme, kube, node, namespace)
	if err := add("volume eviction", eviction, err); err != nil {
		return nil, err
	}
	expansion, err := controller.NewVolumeExpansionController(log, ds, scheme, kube, node, namespace)
	if err := add("volume expansion", expansion, err); err != nil {
		return nil, err
	}
	pvs, err := controller.NewKubernetesPVController(log, ds, scheme, kube, node)
	if err := add("Kubernetes PV", pvs, err); err != nil {
		return nil, err
	}
	pods, err := controller.NewKubernetesPodController(log, ds, scheme, kube, node)
	if err := add("Kubernetes pod", pods, err); err != nil {
		return nil, err
	}
	if err := addBackingImageControllers(log, pod, scheme, namespace, node, opts, proxyConns, add); err != nil {
		return nil, err
	}
	// Longhorn's share manager controller: a share manager pod per RWX
	// volume in use, which the sandbox's kube-scheduler places and its
	// kubelet runs, and test/infrastructure/dataplane's PodServices serves; the
	// volume attached on that pod's node.
	shareManagers, err := controller.NewShareManagerController(log, ds, scheme, kube, namespace, node, ServiceAccount)
	if err := add("share manager", shareManagers, err); err != nil {
		return nil, err
	}
	return out, nil
}
