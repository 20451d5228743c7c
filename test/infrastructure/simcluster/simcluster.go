package simcluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
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
	// ParamMigratable makes a ReadWriteMany claim's volume migratable
	// (Longhorn's live migration, as KubeVirt uses it).
	ParamMigratable = "migratable"
)

// SourceParamSize is the BackingImage source parameter that declares the
// image's size, a quantity, which the simulated backing-image manager reads
// as the size of the downloaded file.
const SourceParamSize = "size"

// SourceParamRealSize is the BackingImage source parameter that declares
// the real size of the image's file on a disk, a quantity no larger than
// SourceParamSize (a sparse qcow2 or raw file takes less than its size):
// the simulated backing-image manager reports it as status.realSize, which
// Longhorn's node controller adds to each disk holding a copy. Without it,
// realSize is the size.
const SourceParamRealSize = "realSize"

// EngineImage is the engine image Longhorn v1.12 runs volumes and replicas with.
const EngineImage = "longhornio/longhorn-engine:v1.12.0"

// Labels Longhorn puts on its objects.
const (
	// LabelVolume names a Replica's (and a Volume's own) volume.
	LabelVolume = "longhornvolume"
	// LabelNode names the node a Replica is scheduled to.
	LabelNode = "longhornnode"
	// LabelDiskUUID names the disk a Replica is scheduled to.
	LabelDiskUUID = "longhorndiskuuid"
	// LabelBackingImage names a Replica's backing image.
	LabelBackingImage = "longhorn.io/backing-image"
)

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

// Options configures the simulated Longhorn.
type Options struct {
	// Namespace is Longhorn's namespace, e.g. longhorn-system.
	Namespace string
	// Nodes are the Longhorn nodes and disks to create and report. The
	// simulated kubelets play the Kubernetes Nodes of the same names.
	Nodes []NodeSpec
	// Allocatable is each simulated Kubernetes node's capacity and
	// allocatable; nil is DefaultAllocatable().
	Allocatable corev1.ResourceList
	// CSI runs the Longhorn CSI driver's part of the cluster that
	// longhorn-manager and the kubelets play: the CSIDriver object and the
	// csi-provisioner Deployment (csiDeployer), and the node plugins'
	// registrations (csiNodeRegistrar). The sidecars that call the driver
	// run in a process of their own (CSISidecars). False (the sandbox's
	// --simulated-longhorn=false) runs only the nodes.
	CSI bool
	// NodeIPs are the nodes' addresses, where the sandbox's simulated data
	// plane serves each node's instance manager (test/infrastructure/dataplane).
	// The kubelets report them as InternalIP and give them to the pods
	// they run, as to a host network pod, except the Longhorn pods that get
	// an IP of their own (pods.go). Required: Longhorn's own node and
	// instance manager controllers keep the Longhorn Nodes' status and the
	// InstanceManagers on these addresses.
	NodeIPs map[string]string
	// NodeLeaseDuration is the duration of each simulated node's Lease in
	// kube-node-lease, renewed every quarter of it; zero is
	// DefaultNodeLeaseDuration, the kubelet's default.
	NodeLeaseDuration time.Duration
	// Outages, when set, are the nodes that went down: their kubelets
	// stop (Outages.Stop). Nil keeps every node up.
	Outages *Outages
	// Writer, when set, is where the kubelets write what a running pod's
	// AnnotationWrite asks for into its Longhorn volumes (writes.go); nil
	// ignores the annotation.
	Writer VolumeWriter
}

// NodeSpec is one simulated node: a Kubernetes Node and a Longhorn Node.
type NodeSpec struct {
	// Name names both the Kubernetes and the Longhorn Node.
	Name string
	// Zone is the Kubernetes Node's topology.kubernetes.io/zone label at
	// registration, which Longhorn reports as status.zone; "" for none.
	Zone string
	// Region is the topology.kubernetes.io/region label; "" for none.
	Region string
	// Tags are the Longhorn node's tags.
	Tags []string
	// Disks are the node's disks.
	Disks []DiskSpec
}

// DiskSpec is one filesystem disk of a node, as an operator configures it
// in the Longhorn Node's spec; its size and UUID are the data plane's
// (test/infrastructure/dataplane), where Longhorn's node controller reads them.
type DiskSpec struct {
	// Name is the disk's key in the Longhorn Node's spec.disks.
	Name string
	// Reserved is the disk's spec storageReserved in bytes.
	Reserved int64
	// Tags are the disk's tags.
	Tags []string
}

// DiskPath returns the path Longhorn's node spec gives the named disk.
func DiskPath(node, disk string) string { return DiskRoot + "/" + node + "/" + disk + "/" }

// DiskRoot is the directory every simulated disk's path is under.
const DiskRoot = "/var/lib/longhorn"

// Setup registers the simulated Longhorn's cache indexes, its start-up work
// and its controllers with mgr. mgr must reach the API server as an
// administrator and cache every namespace.
func Setup(mgr ctrl.Manager, opts Options) error {
	s, err := newSim(mgr, opts)
	if err != nil {
		return err
	}
	if err := registerIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	if err := mgr.Add(&bootstrap{sim: s}); err != nil {
		return fmt.Errorf("adding the simulated Longhorn's start-up: %w", err)
	}
	leases, err := newNodeLeases(mgr, s, opts.NodeLeaseDuration)
	if err != nil {
		return err
	}
	if err := mgr.Add(leases); err != nil {
		return fmt.Errorf("adding the simulated nodes' leases: %w", err)
	}
	controllers := []interface{ setup(ctrl.Manager) error }{
		&settingController{sim: s},
		&kubelet{sim: s},
	}
	if opts.CSI {
		controllers = append(controllers, &csiDeployer{sim: s}, &csiNodeRegistrar{sim: s})
	}
	for _, c := range controllers {
		if err := c.setup(mgr); err != nil {
			return fmt.Errorf("setting up the simulated Longhorn's %T: %w", c, err)
		}
	}
	return nil
}

// NewManager returns a manager running the simulated Longhorn alone, as the
// sandbox, tests and benchmarks run it: cfg's (administrator) credentials,
// a cache over every namespace that keeps no managed fields (nothing here
// reads them, and copying them dominated reading from the cache), metrics
// and health probes off, and controller names not checked for uniqueness,
// so several simulations may run in one process one after another. Start it
// with its Start method.
func NewManager(cfg *rest.Config, scheme *runtime.Scheme, opts Options) (ctrl.Manager, error) {
	mgr, err := newManager(cfg, scheme)
	if err != nil {
		return nil, fmt.Errorf("creating the simulated Longhorn's manager: %w", err)
	}
	if err := Setup(mgr, opts); err != nil {
		return nil, err
	}
	return mgr, nil
}

// newManager returns a manager as NewManager describes it, with nothing
// set up.
func newManager(cfg *rest.Config, scheme *runtime.Scheme) (ctrl.Manager, error) {
	return ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  cache.Options{DefaultTransform: cache.TransformStripManagedFields()},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// The classic work queue: controller-runtime v0.24's priority queue
		// can deadlock on shutdown (kubernetes-sigs/controller-runtime#3538).
		Controller: config.Controller{SkipNameValidation: ptr.To(true), UsePriorityQueue: ptr.To(false)},
	})
}

// sim is what every part of the simulated Longhorn shares.
type sim struct {
	client      client.Client
	namespace   string
	allocatable corev1.ResourceList
	nodes       []NodeSpec
	// nodeByName indexes nodes by name.
	nodeByName map[string]*NodeSpec
	// nodeIPs is Options.NodeIPs.
	nodeIPs map[string]string
	// csi is the CSI sidecars' connection to Longhorn's CSI driver
	// (CSISidecarOptions.CSIEndpoint); nil in the simulated cluster.
	csi *csiConnection
	// outages is Options.Outages.
	outages *Outages
	// writer is Options.Writer.
	writer VolumeWriter
}

// newSim validates opts and returns the shared state.
func newSim(mgr ctrl.Manager, opts Options) (*sim, error) {
	if opts.Namespace == "" {
		return nil, errors.New("the simulated Longhorn needs Longhorn's namespace")
	}
	s := &sim{
		client: mgr.GetClient(), namespace: opts.Namespace, allocatable: opts.Allocatable,
		nodeIPs: opts.NodeIPs, outages: opts.Outages, writer: opts.Writer, nodeByName: map[string]*NodeSpec{},
	}
	if s.allocatable == nil {
		s.allocatable = DefaultAllocatable()
	}
	s.nodes = make([]NodeSpec, len(opts.Nodes))
	for i, n := range opts.Nodes {
		if n.Name == "" {
			return nil, fmt.Errorf("node %d has no name", i)
		}
		if _, dup := s.nodeByName[n.Name]; dup {
			return nil, fmt.Errorf("node %s is listed twice", n.Name)
		}
		n.Disks = append([]DiskSpec(nil), n.Disks...)
		names := map[string]bool{}
		for j := range n.Disks {
			d := &n.Disks[j]
			if d.Name == "" || names[d.Name] {
				return nil, fmt.Errorf("node %s: disk %d has no name or a name used twice (%q)", n.Name, j, d.Name)
			}
			names[d.Name] = true
			if d.Reserved < 0 {
				return nil, fmt.Errorf("node %s disk %s: reserved must not be negative", n.Name, d.Name)
			}
		}
		s.nodes[i] = n
		s.nodeByName[n.Name] = &s.nodes[i]
	}
	return s, nil
}

// inNamespace reports whether o is in Longhorn's namespace.
func (s *sim) inNamespace(o client.Object) bool { return o.GetNamespace() == s.namespace }

// Cache field indexes of the simulated Longhorn.
const (
	// podByClaim indexes Pods by "namespace/claim" of each claim they use.
	podByClaim = "simcluster.pod.claims"
	// pvByVolume indexes Longhorn PersistentVolumes by volume handle.
	pvByVolume = "simcluster.pv.volumeHandle"
	// replicaByVolume indexes Replicas by spec.volumeName.
	replicaByVolume = "simcluster.replica.volumeName"
)

func registerIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	replicaField := func(f func(*lhv1.Replica) string) client.IndexerFunc {
		return func(o client.Object) []string {
			if v := f(o.(*lhv1.Replica)); v != "" {
				return []string{v}
			}
			return nil
		}
	}
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
		{&lhv1.Replica{}, replicaByVolume, replicaField(func(r *lhv1.Replica) string { return r.Spec.VolumeName })},
	}
	for _, ix := range indexes {
		if err := indexer.IndexField(ctx, ix.obj, ix.field, ix.extract); err != nil {
			return fmt.Errorf("indexing %T by %s: %w", ix.obj, ix.field, err)
		}
	}
	return nil
}
