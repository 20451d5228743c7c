package dataplane

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/longhorn/longhorn-manager/engineapi"
	lhtypes "github.com/longhorn/longhorn-manager/types"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// PodServices serves the data plane Longhorn reaches at the IPs of pods it
// creates on the plan's nodes: for each running backing-image manager pod,
// a BackingImageManager, for each running backing-image data source pod, a
// DataSource, and for each running share manager pod, a ShareManager, on
// the pod's IP (which the sandbox's kubelet gives each such pod of its
// own), until the pod goes, as the container in the pod would serve.
type PodServices struct {
	kube      kubernetes.Interface
	namespace string
	nodes     map[string]bool
	devices   BlockDevices
	// network counts the bytes of the backing-image managers' files on
	// their disks; nil: they take no space.
	network *Network
	log     logrus.FieldLogger

	// store is the informer's cache of the pods.
	store cache.Store

	mu      sync.Mutex
	serving map[types.UID]*podService
}

// retryInterval is how long PodServices waits before it tries again to
// serve a pod it could not (its address still held by a pod that went).
const retryInterval = time.Second

// podService is one pod's service while it serves.
type podService struct {
	ip     string
	cancel context.CancelFunc
	done   chan struct{}
}

// NewPodServices returns the services of the pods in namespace on plan's
// nodes; a share manager finds its volume's block device on its node in
// devices (never, when nil), and a backing-image manager's files take
// their bytes on its disk in network (no space, when nil).
func NewPodServices(kube kubernetes.Interface, namespace string, plan *Plan, devices BlockDevices, network *Network, log logrus.FieldLogger) *PodServices {
	nodes := map[string]bool{}
	for _, n := range plan.Nodes {
		nodes[n.Name] = true
	}
	return &PodServices{kube: kube, namespace: namespace, nodes: nodes, devices: devices, network: network, log: log, serving: map[types.UID]*podService{}}
}

// servedComponents are the pods' Longhorn components PodServices serves.
var servedComponents = []string{lhtypes.LonghornLabelBackingImageManager, lhtypes.LonghornLabelBackingImageDataSource, lhtypes.LonghornLabelShareManager}

// Run watches the pods and serves them until ctx ends, then stops every
// service.
func (ps *PodServices) Run(ctx context.Context) error {
	req, err := labels.NewRequirement(lhtypes.GetLonghornLabelComponentKey(), selection.In, servedComponents)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactoryWithOptions(ps.kube, 0, informers.WithNamespace(ps.namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = labels.NewSelector().Add(*req).String() }))
	inf := factory.Core().V1().Pods().Informer()
	ps.store = inf.GetStore()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { ps.sync(ctx, o) },
		UpdateFunc: func(_, o any) { ps.sync(ctx, o) },
		DeleteFunc: func(o any) {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if pod, ok := o.(*corev1.Pod); ok {
				ps.stop(pod.UID)
			}
		},
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	<-ctx.Done()
	factory.Shutdown()
	ps.mu.Lock()
	uids := make([]types.UID, 0, len(ps.serving))
	for uid := range ps.serving {
		uids = append(uids, uid)
	}
	ps.mu.Unlock()
	for _, uid := range uids {
		ps.stop(uid)
	}
	return nil
}

// sync serves a pod that runs with an IP and stops serving one that is
// being deleted, not running, or moved to another IP.
func (ps *PodServices) sync(ctx context.Context, o any) {
	pod, ok := o.(*corev1.Pod)
	if !ok || !ps.nodes[pod.Spec.NodeName] {
		return
	}
	run := pod.DeletionTimestamp == nil && pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP != ""
	ps.mu.Lock()
	cur := ps.serving[pod.UID]
	ps.mu.Unlock()
	if cur != nil && (!run || cur.ip != pod.Status.PodIP) {
		ps.stop(pod.UID)
		cur = nil
	}
	if !run || cur != nil {
		return
	}
	if err := ps.start(ctx, pod); err != nil {
		ps.log.WithError(err).Warnf("Cannot serve pod %s on %s yet, trying again in %s", pod.Name, pod.Status.PodIP, retryInterval)
		time.AfterFunc(retryInterval, func() {
			if ctx.Err() != nil {
				return
			}
			if o, ok, err := ps.store.Get(pod); err == nil && ok {
				ps.sync(ctx, o)
			}
		})
	}
}

// start serves pod on its IP.
func (ps *PodServices) start(ctx context.Context, pod *corev1.Pod) error {
	component := pod.Labels[lhtypes.GetLonghornLabelComponentKey()]
	var port int
	var serve func(context.Context, net.Listener) error
	switch component {
	case lhtypes.LonghornLabelBackingImageManager:
		m := NewBackingImageManager()
		if disk := hostPath(pod, backingImageDiskVolume); disk != "" && ps.network != nil {
			m = NewDiskBackingImageManager(disk, ps.network)
		}
		port, serve = engineapi.BackingImageManagerDefaultPort, m.Serve
	case lhtypes.LonghornLabelBackingImageDataSource:
		spec, err := dataSourceSpec(pod)
		if err != nil {
			return err
		}
		port, serve = engineapi.BackingImageDataSourceDefaultPort, NewDataSource(spec).Serve
	case lhtypes.LonghornLabelShareManager:
		volume, err := shareManagerVolume(pod)
		if err != nil {
			return err
		}
		node := pod.Spec.NodeName
		device := func() bool { return ps.devices != nil && ps.devices.BlockDevice(node, volume) }
		port, serve = engineapi.ShareManagerDefaultPort, NewShareManager(volume, device).Serve
	default:
		return nil
	}
	l, err := net.Listen("tcp", net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("%s: %w", component, err)
	}
	sctx, cancel := context.WithCancel(ctx)
	svc := &podService{ip: pod.Status.PodIP, cancel: cancel, done: make(chan struct{})}
	ps.mu.Lock()
	ps.serving[pod.UID] = svc
	ps.mu.Unlock()
	go func() {
		defer close(svc.done)
		if err := serve(sctx, l); err != nil {
			ps.log.WithError(err).Errorf("The %s of pod %s stopped", component, pod.Name)
		}
	}()
	ps.log.Infof("Serving the %s of pod %s on node %s at %s", component, pod.Name, pod.Spec.NodeName, l.Addr())
	return nil
}

// stop stops serving the pod of uid and waits until its port is free.
func (ps *PodServices) stop(uid types.UID) {
	ps.mu.Lock()
	svc := ps.serving[uid]
	delete(ps.serving, uid)
	ps.mu.Unlock()
	if svc == nil {
		return
	}
	svc.cancel()
	<-svc.done
	ps.log.Infof("Stopped serving pod %s at %s", uid, svc.ip)
}

// shareManagerVolume reads the volume a share manager pod exports from its
// command line (daemon --volume NAME), as longhorn-share-manager does.
func shareManagerVolume(pod *corev1.Pod) (string, error) {
	for _, c := range pod.Spec.Containers {
		args := append(append([]string{}, c.Command...), c.Args...)
		for i, a := range args {
			if v, ok := strings.CutPrefix(a, "--volume="); ok {
				return v, nil
			}
			if a == "--volume" && i+1 < len(args) {
				return args[i+1], nil
			}
		}
	}
	return "", fmt.Errorf("share manager pod %s names no --volume", pod.Name)
}

// dataSourceSpec reads a backing-image data source pod's command line
// (--name, --uuid, --source-type, --checksum, --parameters k=v) and disk
// label, as backing-image-manager's data-source command does.
func dataSourceSpec(pod *corev1.Pod) (DataSourceSpec, error) {
	spec := DataSourceSpec{Parameters: map[string]string{}, DiskUUID: pod.Labels[lhtypes.GetLonghornLabelKey(lhtypes.LonghornLabelDiskUUID)]}
	if len(pod.Spec.Containers) == 0 {
		return spec, fmt.Errorf("data source pod %s has no container", pod.Name)
	}
	args := append(append([]string{}, pod.Spec.Containers[0].Command...), pod.Spec.Containers[0].Args...)
	for i := 0; i < len(args); i++ {
		flag, value, hasValue := strings.Cut(args[i], "=")
		if !strings.HasPrefix(flag, "--") {
			continue
		}
		if !hasValue {
			if i+1 >= len(args) || strings.HasPrefix(args[i+1], "--") {
				continue
			}
			i++
			value = args[i]
		}
		switch flag {
		case "--name":
			spec.Name = value
		case "--uuid":
			spec.UUID = value
		case "--source-type":
			spec.SourceType = value
		case "--checksum":
			spec.Checksum = value
		case "--parameters":
			if k, v, ok := strings.Cut(value, "="); ok {
				spec.Parameters[k] = v
			}
		}
	}
	if spec.Name == "" || spec.UUID == "" || spec.SourceType == "" {
		return spec, fmt.Errorf("data source pod %s: --name, --uuid and --source-type are required, got %q", pod.Name, args)
	}
	return spec, nil
}

// backingImageDiskVolume is the volume of a backing-image manager's pod
// that mounts its disk from the host (longhorn-manager's
// generateBackingImageManagerPodManifest).
const backingImageDiskVolume = "disk-path"

// hostPath returns the host path of pod's volume name, or "".
func hostPath(pod *corev1.Pod, name string) string {
	for _, v := range pod.Spec.Volumes {
		if v.Name == name && v.HostPath != nil {
			return v.HostPath.Path
		}
	}
	return ""
}
