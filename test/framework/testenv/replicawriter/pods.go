package replicawriter

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/longhorn/longhorn-manager/scheduler"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/longhorn/diskschedule/test/infrastructure/longhornpod"
	"github.com/longhorn/diskschedule/test/infrastructure/simcluster"
)

// Pod is one longhorn-manager pod of a test or benchmark: Longhorn v1.12.0's
// own datastore (a longhornpod.Pod, with informers of its own on the API
// server, so its view is as stale as a real pod's), Longhorn's own replica
// scheduler over it, and what its volume controller's queue reacts to: the
// Longhorn Node events its datastore delivers.
type Pod struct {
	*longhornpod.Pod
	// Scheduler is Longhorn's replica scheduler over the pod's datastore.
	Scheduler *scheduler.ReplicaScheduler
	namespace string
	// nodeEvents is closed and replaced at each Longhorn Node event.
	mu         sync.Mutex
	nodeEvents chan struct{}
	// answers records when the API server answered replica writes.
	answers *answers
}

// StartPods starts one longhorn-manager pod per node name on cfg, in
// Longhorn's namespace, each with its own datastore; their informers run
// until ctx ends. It returns once every pod's datastore has synced.
func StartPods(ctx context.Context, cfg *rest.Config, namespace string, nodes ...string) ([]*Pod, error) {
	a := &answers{at: map[string]time.Time{}}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(a.wrap)
	out := make([]*Pod, 0, len(nodes))
	for _, node := range nodes {
		// Client rates far above longhorn-manager's own: several pods run
		// in one test process and are never to be throttled.
		m, err := longhornpod.New(cfg, namespace, node, 1000, 2000)
		if err != nil {
			return nil, fmt.Errorf("building the longhorn-manager pod of %s: %w", node, err)
		}
		if err := m.Start(ctx); err != nil {
			return nil, fmt.Errorf("starting the longhorn-manager pod of %s: %w", node, err)
		}
		p := &Pod{Pod: m, Scheduler: scheduler.NewReplicaScheduler(m.DataStore), namespace: namespace, nodeEvents: make(chan struct{}), answers: a}
		// As Longhorn's volume controller registers its Node handler: every
		// add, update and delete, no resync.
		_, err = m.DataStore.NodeInformer.AddEventHandlerWithResyncPeriod(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { p.nodeEvent() },
			UpdateFunc: func(any, any) { p.nodeEvent() },
			DeleteFunc: func(any) { p.nodeEvent() },
		}, 0)
		if err != nil {
			return nil, fmt.Errorf("watching the Longhorn Nodes of the pod of %s: %w", node, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// nodeEvent wakes every placement waiting for a Node change.
func (p *Pod) nodeEvent() {
	p.mu.Lock()
	defer p.mu.Unlock()
	close(p.nodeEvents)
	p.nodeEvents = make(chan struct{})
}

// nextNodeEvent returns a channel closed at the next Longhorn Node event
// the pod's datastore delivers.
func (p *Pod) nextNodeEvent() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nodeEvents
}

// WaitForVolumes waits until the pod's datastore holds each named volume
// and its replicas, as Longhorn's volume controller only works on volumes
// its informers delivered.
func (p *Pod) WaitForVolumes(ctx context.Context, volumes map[string][]string) error {
	err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		for volume, replicas := range volumes {
			if _, err := p.DataStore.GetVolumeRO(volume); err != nil {
				return false, nil
			}
			for _, r := range replicas {
				if _, err := p.DataStore.GetReplicaRO(r); err != nil {
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the datastore of the pod of %s to hold %d volumes: %w", p.Node, len(volumes), err)
	}
	return nil
}

// catchUp waits until the pod's datastore holds every Longhorn Node at
// least at the resourceVersion live reads from the API server now.
func (p *Pod) catchUp(ctx context.Context, live client.Reader) error {
	list := &lhv1.NodeList{}
	if err := live.List(ctx, list, client.InNamespace(p.namespace)); err != nil {
		return fmt.Errorf("listing Longhorn Nodes: %w", err)
	}
	err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, catchUpTimeout, true, func(context.Context) (bool, error) {
		for i := range list.Items {
			cached, err := p.DataStore.GetNodeRO(list.Items[i].Name)
			if err != nil || !atLeast(cached.ResourceVersion, list.Items[i].ResourceVersion) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the datastore of the pod of %s to catch up with the Longhorn Nodes: %w", p.Node, err)
	}
	return nil
}

// catchUpTimeout bounds how long a datastore may lag behind the API server.
const catchUpTimeout = 30 * time.Second

// atLeast reports whether resourceVersion a is at least b (both etcd
// revisions, as kube-apiserver writes them).
func atLeast(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	return errA == nil && errB == nil && x >= y
}

// answers records, per replica, when the API server last answered an
// Update of it: the end of a write as the API server sees it, before the
// datastore waits for its own cache to hold the write.
type answers struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (a *answers) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if req.Method == http.MethodPut {
			if _, name, ok := strings.Cut(req.URL.Path, "/replicas/"); ok && !strings.Contains(name, "/") {
				now := time.Now()
				a.mu.Lock()
				a.at[name] = now
				a.mu.Unlock()
			}
		}
		return resp, err
	})
}

// last returns when the API server last answered an Update of the replica.
func (a *answers) last(replica string) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.at[replica]
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// CreateVolume creates a Longhorn Volume of size bytes as the Longhorn CSI
// driver creates one in namespace for the claim named claim (also its UID)
// of a class of one replica without data locality (a best-effort volume's
// replica waits until the volume is attached), with the given disk
// selector, and then its unscheduled replica as Longhorn's volume
// controller creates it; it returns the replica as created.
func CreateVolume(ctx context.Context, c client.Client, namespace, claim string, size int64, diskSelector ...string) (*lhv1.Replica, error) {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: "default", UID: types.UID(claim)},
		Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(size, resource.BinarySI)},
		}},
	}
	class := &storagev1.StorageClass{
		ObjectMeta:  metav1.ObjectMeta{Name: "longhorn-one-replica"},
		Provisioner: simcluster.CSIDriver,
		Parameters: map[string]string{
			simcluster.ParamNumberOfReplicas: "1",
			simcluster.ParamDataLocality:     string(lhv1.DataLocalityDisabled),
		},
	}
	vol, err := simcluster.VolumeFor(pvc, class, namespace)
	if err != nil {
		return nil, err
	}
	vol.Spec.DiskSelector = append(vol.Spec.DiskSelector, diskSelector...)
	if err := c.Create(ctx, vol); err != nil {
		return nil, fmt.Errorf("creating volume %s: %w", vol.Name, err)
	}
	rep := newReplica(vol)
	if err := c.Create(ctx, rep); err != nil {
		return nil, fmt.Errorf("creating replica %s: %w", rep.Name, err)
	}
	return rep, nil
}

// newReplica returns vol's first replica, unscheduled, as Longhorn's volume
// controller creates one: owned by the volume, stopped, the volume's size,
// engine image and data engine, with Longhorn's labels.
func newReplica(vol *lhv1.Volume) *lhv1.Replica {
	return &lhv1.Replica{
		ObjectMeta: metav1.ObjectMeta{
			Name: vol.Name + "-r-0", Namespace: vol.Namespace,
			Labels: map[string]string{
				simcluster.LabelVolume: vol.Name, simcluster.LabelNode: "", simcluster.LabelDiskUUID: "",
				simcluster.LabelBackingImage: vol.Spec.BackingImage,
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: lhv1.SchemeGroupVersion.String(), Kind: "Volume", Name: vol.Name, UID: vol.UID,
			}},
		},
		Spec: lhv1.ReplicaSpec{
			InstanceSpec: lhv1.InstanceSpec{
				VolumeName: vol.Name, VolumeSize: vol.Spec.Size, Image: vol.Spec.Image,
				DesireState: lhv1.InstanceStateStopped, DataEngine: vol.Spec.DataEngine,
			},
			EngineName:              vol.Name + "-e-0",
			Active:                  true,
			BackingImage:            vol.Spec.BackingImage,
			RevisionCounterDisabled: vol.Spec.RevisionCounterDisabled,
			SnapshotMaxCount:        vol.Spec.SnapshotMaxCount,
			SnapshotMaxSize:         vol.Spec.SnapshotMaxSize,
		},
	}
}
