package simcluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/kubernetes-csi/external-provisioner/v6/pkg/capacity"
	"github.com/kubernetes-csi/external-provisioner/v6/pkg/capacity/topology"
	"github.com/kubernetes-csi/external-provisioner/v6/pkg/owner"
	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhclientset "github.com/longhorn/longhorn-manager/k8s/pkg/client/clientset/versioned"
	lhtypes "github.com/longhorn/longhorn-manager/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// DefaultCapacityPollInterval is how often the CSI external-provisioner
// refreshes every CSIStorageCapacity object it publishes: its
// --capacity-poll-interval default, which Longhorn v1.12 keeps.
const DefaultCapacityPollInterval = time.Minute

// SettingCSIStorageCapacityTracking is Longhorn v1.12's setting that makes
// its CSIDriver ask kube-scheduler to use the published storage capacity
// (spec.storageCapacity); Longhorn's default is false.
const SettingCSIStorageCapacityTracking = string(lhtypes.SettingNameCSIStorageCapacityTracking)

// Longhorn v1.12's external-provisioner, as longhorn-manager deploys it
// (csi/deployment.go) and as its flags default.
const (
	// csiProvisionerDeployment is the Deployment longhorn-manager runs the
	// external-provisioner in. It owns the CSIStorageCapacity objects:
	// Longhorn passes --capacity-ownerref-level=2 (the provisioner pod's
	// ReplicaSet's Deployment).
	csiProvisionerDeployment = lhtypes.CSIProvisionerName
	// csiProvisionerImage is the image of that Deployment's container: the
	// external-provisioner release whose capacity controller runs here.
	csiProvisionerImage = "registry.k8s.io/sig-storage/csi-provisioner:v6.3.0"
	// capacityManagedBy is the csi.storage.k8s.io/managed-by label of the
	// objects a central (not per-node) external-provisioner publishes.
	capacityManagedBy = "external-provisioner"
	// capacityClientQPS and capacityClientBurst are the rate limits of the
	// client that writes CSIStorageCapacity objects
	// (--kube-api-capacity-qps, --kube-api-capacity-burst).
	capacityClientQPS, capacityClientBurst = 1, 5
	// capacityThreads is --capacity-threads.
	capacityThreads = 1
	// capacityTimeout bounds each GetCapacity call: Longhorn's --timeout=1m50s.
	capacityTimeout = 110 * time.Second
	// csiInformerResync is the resync period of the external-provisioner's
	// informers (its ResyncPeriodOfCsiNodeInformer).
	csiInformerResync = time.Hour
	// csiUnregisterTimeout bounds the removal of the node plugin's
	// registrations when the simulation stops.
	csiUnregisterTimeout = 5 * time.Second
)

// csiDeployer plays what longhorn-manager does for its CSI driver's
// objects: at start it creates the csi-storage-capacity-tracking Setting
// at Longhorn's default when it is missing and the csi-provisioner
// Deployment, scaled to zero because its external-provisioner runs in
// the CSI sidecars' process (CSISidecars); and, as its driver deployer and setting
// controller do, it keeps the CSIDriver driver.longhorn.io with
// podInfoOnMount and with storageCapacity equal to the setting, so that
// kube-scheduler checks the published capacity exactly when the setting is
// true.
type csiDeployer struct {
	sim *sim
}

func (d *csiDeployer) setup(mgr ctrl.Manager) error {
	if err := mgr.Add(manager.RunnableFunc(d.deploy)); err != nil {
		return fmt.Errorf("adding the CSI deployment: %w", err)
	}
	trackingSetting := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return d.sim.inNamespace(o) && o.GetName() == SettingCSIStorageCapacityTracking
	})
	theDriver := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == CSIDriver })
	return ctrl.NewControllerManagedBy(mgr).Named("simcluster-csi-driver").
		For(&lhv1.Setting{}, builder.WithPredicates(trackingSetting)).
		Watches(&storagev1.CSIDriver{}, handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: d.sim.namespace, Name: SettingCSIStorageCapacityTracking}}}
		}), builder.WithPredicates(theDriver)).
		Complete(reconcile.Func(d.reconcile))
}

// deploy creates the setting (when missing) and the csi-provisioner
// Deployment, retrying until it succeeds or ctx ends.
func (d *csiDeployer) deploy(ctx context.Context) error {
	setting := &lhv1.Setting{
		ObjectMeta: metav1.ObjectMeta{Name: SettingCSIStorageCapacityTracking, Namespace: d.sim.namespace},
		Value:      lhtypes.SettingDefinitionCSIStorageCapacityTracking.Default,
	}
	err := wait.PollUntilContextCancel(ctx, bootstrapRetry, true, func(ctx context.Context) (bool, error) {
		for _, obj := range []client.Object{setting, provisionerDeployment(d.sim.namespace)} {
			if err := createIfMissing(ctx, d.sim, obj.DeepCopyObject().(client.Object)); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "Creating the CSI driver's objects; retrying", "name", obj.GetName())
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("creating the CSI driver's objects: %w", err)
	}
	return nil
}

// reconcile keeps the CSIDriver's storageCapacity equal to the setting; a
// missing setting counts as Longhorn's default (false), as longhorn-manager
// reads it.
func (d *csiDeployer) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	tracking := false
	setting := &lhv1.Setting{}
	switch err := d.sim.client.Get(ctx, req.NamespacedName, setting); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return reconcile.Result{}, err
	default:
		v, err := strconv.ParseBool(setting.Value)
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("setting %s: %q is not a boolean: %w", setting.Name, setting.Value, err)
		}
		tracking = v
	}
	driver := &storagev1.CSIDriver{}
	if err := d.sim.client.Get(ctx, client.ObjectKey{Name: CSIDriver}, driver); apierrors.IsNotFound(err) {
		driver = &storagev1.CSIDriver{
			ObjectMeta: metav1.ObjectMeta{Name: CSIDriver},
			Spec:       storagev1.CSIDriverSpec{PodInfoOnMount: ptr.To(true), StorageCapacity: ptr.To(tracking)},
		}
		if err := d.sim.client.Create(ctx, driver); err != nil && !apierrors.IsAlreadyExists(err) {
			return reconcile.Result{}, fmt.Errorf("creating CSIDriver %s: %w", CSIDriver, err)
		}
		ctrl.LoggerFrom(ctx).Info("Deployed the CSI driver", "csiDriver", CSIDriver, "storageCapacity", tracking)
		return reconcile.Result{}, nil
	} else if err != nil {
		return reconcile.Result{}, err
	}
	if ptr.Deref(driver.Spec.StorageCapacity, false) == tracking {
		return reconcile.Result{}, nil
	}
	base := driver.DeepCopy()
	driver.Spec.StorageCapacity = ptr.To(tracking)
	if err := d.sim.client.Patch(ctx, driver, client.MergeFrom(base)); err != nil {
		return reconcile.Result{}, fmt.Errorf("setting storageCapacity of CSIDriver %s: %w", CSIDriver, err)
	}
	ctrl.LoggerFrom(ctx).Info("Updated the CSI driver's storage capacity tracking", "csiDriver", CSIDriver, "storageCapacity", tracking)
	return reconcile.Result{}, nil
}

// provisionerDeployment returns the csi-provisioner Deployment of
// Longhorn's CSI driver in namespace, labelled as longhorn-manager labels
// it, with no replicas: its external-provisioner runs in the CSI sidecars'
// process (CSISidecars). It owns the CSIStorageCapacity objects.
func provisionerDeployment(namespace string) *appsv1.Deployment {
	labels := lhtypes.GetBaseLabelsForSystemManagedComponent()
	labels["app"] = csiProvisionerDeployment
	selector := map[string]string{"app": csiProvisionerDeployment}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: csiProvisionerDeployment, Namespace: namespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: selector},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  csiProvisionerDeployment,
					Image: csiProvisionerImage,
					Args:  []string{"--enable-capacity", "--capacity-ownerref-level=2", "--immediate-topology=false", "--timeout=1m50s"},
				}}},
			},
		},
	}
}

// csiNodeRegistrar plays each simulated node's kubelet registering
// Longhorn's CSI node plugin: the node's CSINode lists driver.longhorn.io
// with the node's name as its ID and the topology keys of the plugin's
// NodeGetInfo, which Longhorn v1.12 fills (csi/node_server.go) with the
// node labels that the csi-allowed-topology-keys setting names, plus
// kubernetes.io/hostname and topology.kubernetes.io/zone whenever the node
// has them. The external-provisioner makes one topology segment of each
// node's values of these keys, and Longhorn's GetCapacity finds the node by
// the hostname. When the simulation stops, the registrations go again, as
// the kubelet removes a plugin that goes away.
type csiNodeRegistrar struct {
	sim    *sim
	reader client.Reader
}

func (r *csiNodeRegistrar) setup(mgr ctrl.Manager) error {
	r.reader = mgr.GetAPIReader()
	if err := mgr.Add(manager.RunnableFunc(r.unregisterOnStop)); err != nil {
		return fmt.Errorf("adding the CSI node plugin's removal: %w", err)
	}
	simulated := predicate.NewPredicateFuncs(func(o client.Object) bool { return r.sim.nodeByName[o.GetName()] != nil })
	return ctrl.NewControllerManagedBy(mgr).Named("simcluster-csi-node").
		For(&corev1.Node{}, builder.WithPredicates(simulated)).
		Watches(&storagev1.CSINode{}, &handler.EnqueueRequestForObject{}, builder.WithPredicates(simulated)).
		Complete(reconcile.Func(r.reconcile))
}

// reconcile registers the driver in the node's CSINode, creating it (owned
// by the Node, as the kubelet does) when missing; other drivers stay.
func (r *csiNodeRegistrar) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := r.sim.client.Get(ctx, req.NamespacedName, node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	allowed, err := r.allowedTopologyKeys(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	want := storagev1.CSINodeDriver{Name: CSIDriver, NodeID: node.Name, TopologyKeys: TopologyKeys(node.Labels, allowed)}
	csiNode := &storagev1.CSINode{}
	if err := r.sim.client.Get(ctx, req.NamespacedName, csiNode); apierrors.IsNotFound(err) {
		csiNode = &storagev1.CSINode{
			ObjectMeta: metav1.ObjectMeta{Name: node.Name, OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID,
			}}},
			Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{want}},
		}
		if err := r.sim.client.Create(ctx, csiNode); err != nil && !apierrors.IsAlreadyExists(err) {
			return reconcile.Result{}, fmt.Errorf("creating CSINode %s: %w", node.Name, err)
		}
		return reconcile.Result{}, nil
	} else if err != nil {
		return reconcile.Result{}, err
	}
	drivers := slices.DeleteFunc(slices.Clone(csiNode.Spec.Drivers), func(d storagev1.CSINodeDriver) bool { return d.Name == CSIDriver })
	drivers = append(drivers, want)
	if apiequality.Semantic.DeepEqual(drivers, csiNode.Spec.Drivers) {
		return reconcile.Result{}, nil
	}
	csiNode.Spec.Drivers = drivers
	// An Update with the resourceVersion read: the kubelet is the one
	// writer of a CSINode, and a conflict is looked at again.
	if err := r.sim.client.Update(ctx, csiNode); err != nil {
		return requeueOnConflict(fmt.Errorf("registering %s in CSINode %s: %w", CSIDriver, node.Name, err))
	}
	return reconcile.Result{}, nil
}

// allowedTopologyKeys reads the csi-allowed-topology-keys setting; a
// missing setting allows none, as Longhorn's node plugin reads it.
func (r *csiNodeRegistrar) allowedTopologyKeys(ctx context.Context) (map[string]bool, error) {
	setting := &lhv1.Setting{}
	key := client.ObjectKey{Namespace: r.sim.namespace, Name: string(lhtypes.SettingNameCSIAllowedTopologyKeys)}
	if err := r.sim.client.Get(ctx, key, setting); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return lhtypes.ParseCSIAllowedTopologyKeys(setting.Value), nil
}

// TopologyKeys returns the topology keys Longhorn v1.12's CSI node plugin
// reports for a node with these labels: the allowed labels it has, plus
// kubernetes.io/hostname and topology.kubernetes.io/zone when it has them,
// sorted.
func TopologyKeys(nodeLabels map[string]string, allowed map[string]bool) []string {
	keys := []string{}
	for k := range nodeLabels {
		if allowed[k] || k == corev1.LabelHostname || k == corev1.LabelTopologyZone {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// unregisterOnStop waits until the simulation stops, then removes the
// driver from the CSINode of every simulated node.
func (r *csiNodeRegistrar) unregisterOnStop(ctx context.Context) error {
	<-ctx.Done()
	ctx, cancel := context.WithTimeout(context.Background(), csiUnregisterTimeout)
	defer cancel()
	var errs []error
	for _, n := range r.sim.nodes {
		csiNode := &storagev1.CSINode{}
		if err := r.reader.Get(ctx, client.ObjectKey{Name: n.Name}, csiNode); err != nil {
			errs = append(errs, client.IgnoreNotFound(err))
			continue
		}
		base := csiNode.DeepCopy()
		csiNode.Spec.Drivers = slices.DeleteFunc(csiNode.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == CSIDriver })
		if len(csiNode.Spec.Drivers) == len(base.Spec.Drivers) {
			continue
		}
		if err := r.sim.client.Patch(ctx, csiNode, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("removing %s from CSINode %s: %w", CSIDriver, n.Name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Removing the CSI node plugin's registrations")
	}
	return nil
}

// capacityPublisher is the external-provisioner's storage capacity
// tracking, as Longhorn v1.12 runs it (--enable-capacity): the
// external-provisioner's own capacity controller
// (github.com/kubernetes-csi/external-provisioner/v6/pkg/capacity, with its
// node topology informer) publishes one CSIStorageCapacity object per
// topology segment (one per node: its hostname and zone) and per
// StorageClass of the driver with WaitForFirstConsumer binding, in
// Longhorn's namespace, owned by the csi-provisioner Deployment and
// labelled csi.storage.k8s.io/drivername and csi.storage.k8s.io/managed-by,
// with the capacity and maximumVolumeSize that Longhorn's GetCapacity
// answers (longhornCSI). It refreshes every object once per poll interval,
// and the objects of a class after each volume of that class is
// provisioned (Longhorn's PersistentVolumes carry no node affinity), through
// the controller's provision wrapper around csiProvisioner. It writes
// through its own client at the external-provisioner's rate limits.
type capacityPublisher struct {
	sim          *sim
	config       *rest.Config
	pollInterval time.Duration
}

// start builds the capacity controller and runs it, its informers and its
// topology worker until ctx ends, counting them in workers, and returns it
// for the provision wrapper. As the external-provisioner does at start, it
// first looks up its owner, the csi-provisioner Deployment, waiting until
// it exists.
func (c *capacityPublisher) start(ctx context.Context, workers *sync.WaitGroup) (*capacity.Controller, error) {
	log := klog.FromContext(ctx)
	var ownerRef *metav1.OwnerReference
	deployment := appsv1.SchemeGroupVersion.WithKind("Deployment")
	err := wait.PollUntilContextCancel(ctx, bootstrapRetry, true, func(context.Context) (bool, error) {
		ref, err := owner.Lookup(c.config, c.sim.namespace, csiProvisionerDeployment, deployment, 0)
		if err != nil {
			log.V(1).Info("Waiting for the external-provisioner's Deployment", "deployment", csiProvisionerDeployment, "reason", err.Error())
			return false, nil
		}
		ownerRef = ref
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("looking up the owner of the CSIStorageCapacity objects, Deployment %s/%s: %w", c.sim.namespace, csiProvisionerDeployment, err)
	}
	kube, err := kubernetes.NewForConfig(c.config)
	if err != nil {
		return nil, fmt.Errorf("creating the external-provisioner's client: %w", err)
	}
	capConfig := rest.CopyConfig(c.config)
	capConfig.QPS, capConfig.Burst = capacityClientQPS, capacityClientBurst
	capClient, err := kubernetes.NewForConfig(capConfig)
	if err != nil {
		return nil, fmt.Errorf("creating the external-provisioner's capacity client: %w", err)
	}
	lh, err := lhclientset.NewForConfig(c.config)
	if err != nil {
		return nil, fmt.Errorf("creating the Longhorn CSI driver's client: %w", err)
	}
	factory := informers.NewSharedInformerFactory(kube, csiInformerResync)
	own := informers.NewSharedInformerFactoryWithOptions(capClient, csiInformerResync,
		informers.WithNamespace(c.sim.namespace),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.LabelSelector = labels.Set{capacity.DriverNameLabel: CSIDriver, capacity.ManagedByLabel: capacityManagedBy}.String()
		}))
	topo := topology.NewNodeTopology(CSIDriver, capClient, factory.Core().V1().Nodes(), factory.Storage().V1().CSINodes(),
		workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](provisionRetryStart, provisionRetryMax),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "csitopology"}))
	controller := capacity.NewCentralCapacityController(
		&longhornCSI{lh: lh, namespace: c.sim.namespace},
		CSIDriver,
		capacity.NewV1ClientFactory(capClient),
		workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[capacity.QueueKey](provisionRetryStart, provisionRetryMax),
			workqueue.TypedRateLimitingQueueConfig[capacity.QueueKey]{Name: "csistoragecapacity"}),
		ownerRef,
		capacityManagedBy,
		c.sim.namespace,
		topo,
		factory.Storage().V1().StorageClasses(),
		own.Storage().V1().CSIStorageCapacities(),
		c.pollInterval,
		false, // --capacity-for-immediate-binding
		capacityTimeout,
	)
	factory.Start(ctx.Done())
	own.Start(ctx.Done())
	workers.Go(func() { topo.RunWorker(ctx) })
	workers.Go(func() { controller.Run(ctx, capacityThreads, nil) })
	workers.Go(func() {
		<-ctx.Done()
		factory.Shutdown()
		own.Shutdown()
	})
	log.Info("Publishing storage capacity", "owner", ownerRef.Kind+"/"+ownerRef.Name, "pollInterval", c.pollInterval)
	return controller, nil
}

// longhornCSI is Longhorn v1.12's CSI controller service as far as the
// capacity controller calls it: GetCapacity, answered as Longhorn's
// (csi/controller_server.go) answers it, reading the Longhorn Nodes and
// Settings from the API server with Longhorn's own clientset. Longhorn's
// controller server itself runs in sandbox-longhorn, and answers the
// provisioner's and the resizer's calls there (csiclient.go); GetCapacity
// is still answered here, its formula followed with Longhorn's own
// condition and tag helpers, so that capacity tracking also runs without
// sandbox-longhorn (capacity_test.go).
type longhornCSI struct {
	lh        lhclientset.Interface
	namespace string
}

var _ capacity.CSICapacityClient = &longhornCSI{}

// StorageClass parameters Longhorn's GetCapacity reads besides the
// selectors.
const (
	ParamDataEngine          = "dataEngine"
	ParamStorageCapacityMode = "storageCapacityMode"
)

// GetCapacity answers for the node (mode "node", the default: the
// topology's hostname) or the zone (mode "zone") the largest volume one
// disk can still take and the space all eligible disks can still take.
func (l *longhornCSI) GetCapacity(ctx context.Context, req *csi.GetCapacityRequest, _ ...grpc.CallOption) (*csi.GetCapacityResponse, error) {
	q, mode, err := l.query(ctx, req.GetParameters())
	if err != nil {
		return nil, err
	}
	segments := req.GetAccessibleTopology().GetSegments()
	if len(segments) == 0 {
		return nil, status.Error(codes.InvalidArgument, "missing or empty accessible topology request parameter")
	}
	var maximum, available int64
	switch mode {
	case lhtypes.CSIStorageCapacityTrackingModeNode:
		name, ok := segments[corev1.LabelHostname]
		if !ok {
			return nil, status.Errorf(codes.InvalidArgument, "missing %q topology segment", corev1.LabelHostname)
		}
		node, err := l.lh.LonghornV1beta2().Nodes(l.namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, status.Errorf(codes.NotFound, "node %s not found", name)
		} else if err != nil {
			return nil, status.Errorf(codes.Internal, "failed to get node: %v", err)
		}
		maximum, available = NodeCapacity(node, q)
	case lhtypes.CSIStorageCapacityTrackingModeZone:
		zone, ok := segments[corev1.LabelTopologyZone]
		if !ok {
			return nil, status.Errorf(codes.InvalidArgument, "missing %q topology segment", corev1.LabelTopologyZone)
		}
		nodes, err := l.lh.LonghornV1beta2().Nodes(l.namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, status.Errorf(codes.Internal, "failed to list nodes: %v", err)
		}
		for i := range nodes.Items {
			if nodes.Items[i].Status.Zone != zone {
				continue
			}
			m, a := NodeCapacity(&nodes.Items[i], q)
			maximum, available = max(maximum, m), available+a
		}
	default:
		return nil, status.Errorf(codes.InvalidArgument, "unexpected value %q for storage class parameter %q", mode, ParamStorageCapacityMode)
	}
	return &csi.GetCapacityResponse{MaximumVolumeSize: wrapperspb.Int64(maximum), AvailableCapacity: available}, nil
}

// query reads the class parameters and the settings GetCapacity depends
// on; a setting that cannot be read or parsed is an internal error, as in
// Longhorn.
func (l *longhornCSI) query(ctx context.Context, params map[string]string) (CapacityQuery, lhtypes.CSIStorageCapacityTrackingMode, error) {
	q := CapacityQuery{DataEngine: lhv1.DataEngineTypeV1}
	for _, b := range []struct {
		name lhtypes.SettingName
		to   *bool
	}{
		{lhtypes.SettingNameAllowEmptyNodeSelectorVolume, &q.AllowEmptyNodeSelectorVolume},
		{lhtypes.SettingNameAllowEmptyDiskSelectorVolume, &q.AllowEmptyDiskSelectorVolume},
	} {
		v, err := l.setting(ctx, b.name)
		if err == nil {
			*b.to, err = strconv.ParseBool(v)
		}
		if err != nil {
			return q, "", status.Errorf(codes.Internal, "failed to get setting %v: %v", b.name, err)
		}
	}
	v, err := l.setting(ctx, lhtypes.SettingNameStorageOverProvisioningPercentage)
	if err == nil {
		q.OverProvisioningPercentage, err = strconv.ParseInt(v, 10, 64)
	}
	if err != nil {
		return q, "", status.Errorf(codes.Internal, "failed to get setting %v: %v", lhtypes.SettingNameStorageOverProvisioningPercentage, err)
	}
	if s := params[ParamNodeSelector]; s != "" {
		q.NodeSelector = strings.Split(s, ",")
	}
	if s := params[ParamDiskSelector]; s != "" {
		q.DiskSelector = strings.Split(s, ",")
	}
	if s, ok := params[ParamDataEngine]; ok {
		q.DataEngine = lhv1.DataEngineType(s)
	}
	mode := lhtypes.CSIStorageCapacityTrackingModeNode
	if s, ok := params[ParamStorageCapacityMode]; ok {
		mode = lhtypes.CSIStorageCapacityTrackingMode(s)
	}
	return q, mode, nil
}

func (l *longhornCSI) setting(ctx context.Context, name lhtypes.SettingName) (string, error) {
	s, err := l.lh.LonghornV1beta2().Settings(l.namespace).Get(ctx, string(name), metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return s.Value, nil
}

// CapacityQuery is what Longhorn's GetCapacity weighs a node's disks by
// besides the node itself: the StorageClass's selectors and data engine,
// and Longhorn's settings.
type CapacityQuery struct {
	// NodeSelector and DiskSelector are the class's nodeSelector and
	// diskSelector tags.
	NodeSelector, DiskSelector []string
	// DataEngine is the class's dataEngine: v1 volumes live on filesystem
	// disks, v2 volumes on block disks.
	DataEngine lhv1.DataEngineType
	// AllowEmptyNodeSelectorVolume and AllowEmptyDiskSelectorVolume are
	// Longhorn's settings: whether a class without a selector may use
	// tagged nodes and disks.
	AllowEmptyNodeSelectorVolume, AllowEmptyDiskSelectorVolume bool
	// OverProvisioningPercentage is storage-over-provisioning-percentage.
	OverProvisioningPercentage int64
}

// NodeCapacity returns what Longhorn v1.12's CSI GetCapacity reports for a
// Longhorn Node: a node that is not Ready, not Schedulable, not allowing
// scheduling, evicting, or whose tags do not hold the node selector offers
// nothing; otherwise every disk (of the node's status and spec) that allows
// scheduling, is not evicting, is Schedulable, holds the disk selector and
// suits the data engine can still take
//
//	max((storageMaximum − storageReserved) × over-provisioning% / 100 − storageScheduled, 0)
//
// bytes (integer arithmetic). availableCapacity is the sum over those
// disks, maximumVolumeSize the largest one (both 0 when none qualifies).
func NodeCapacity(node *lhv1.Node, q CapacityQuery) (maximumVolumeSize, availableCapacity int64) {
	if !conditionTrue(node.Status.Conditions, lhv1.NodeConditionTypeReady) ||
		!conditionTrue(node.Status.Conditions, lhv1.NodeConditionTypeSchedulable) ||
		!node.Spec.AllowScheduling || node.Spec.EvictionRequested ||
		!lhtypes.IsSelectorsInTags(slices.Clone(node.Spec.Tags), q.NodeSelector, q.AllowEmptyNodeSelectorVolume) {
		return 0, 0
	}
	for name, st := range node.Status.DiskStatus {
		spec, ok := node.Spec.Disks[name]
		if !ok || !diskTakesVolumes(spec, st, q) {
			continue
		}
		limit := (st.StorageMaximum - spec.StorageReserved) * q.OverProvisioningPercentage / 100
		free := max(limit-st.StorageScheduled, 0)
		maximumVolumeSize = max(maximumVolumeSize, free)
		availableCapacity += free
	}
	return maximumVolumeSize, availableCapacity
}

// diskTakesVolumes reports whether GetCapacity counts a disk: scheduling
// allowed, not evicting, Schedulable, its tags holding the disk selector,
// and of the kind the data engine uses.
func diskTakesVolumes(spec lhv1.DiskSpec, st *lhv1.DiskStatus, q CapacityQuery) bool {
	if st == nil || !spec.AllowScheduling || spec.EvictionRequested ||
		!conditionTrue(st.Conditions, lhv1.DiskConditionTypeSchedulable) ||
		!lhtypes.IsSelectorsInTags(slices.Clone(spec.Tags), q.DiskSelector, q.AllowEmptyDiskSelectorVolume) {
		return false
	}
	switch q.DataEngine {
	case lhv1.DataEngineTypeV1:
		return st.Type == lhv1.DiskTypeFilesystem
	case lhv1.DataEngineTypeV2:
		return st.Type == lhv1.DiskTypeBlock
	}
	return false
}

// conditionTrue reports whether Longhorn's condition typ is True, read
// with Longhorn's own GetCondition.
func conditionTrue(conds []lhv1.Condition, typ string) bool {
	return lhtypes.GetCondition(conds, typ).Status == lhv1.ConditionStatusTrue
}
