package simlonghorn

import (
	"context"
	"errors"
	"hash/fnv"
	"io"
	"slices"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/longhorn/longhorn-manager/scheduler"
	"github.com/sirupsen/logrus"
	"k8s.io/client-go/rest"

	"github.com/longhorn/diskschedule/internal/longhornpod"
)

// LonghornManager is one simulated longhorn-manager pod: Longhorn v1.12.0's
// own datastore (a longhornpod.Pod, with informers of its own on the API
// server, so its view is as stale as a real pod's), and Longhorn's own
// replica scheduler over it. The volume controller runs several; tests and
// benchmarks that play Longhorn's volume controllers themselves start their
// own with StartLonghornManager.
type LonghornManager struct {
	*longhornpod.Pod
	// Scheduler is Longhorn's replica scheduler over DataStore.
	Scheduler *scheduler.ReplicaScheduler
}

// StartLonghornManager builds a longhorn-manager pod on cfg and runs its
// informers until ctx ends; it returns once they have synced.
func StartLonghornManager(ctx context.Context, cfg *rest.Config, namespace, node string) (*LonghornManager, error) {
	p, err := newManagerPod(cfg, namespace, node)
	if err != nil {
		return nil, err
	}
	if err := p.Start(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// newManagerPod builds the pod's clients, informers, datastore and
// scheduler; Start runs the informers. The simulated pods' client rates
// are far above longhorn-manager's own, so that the simulation, which
// stands for several pods in one, is never throttled.
func newManagerPod(cfg *rest.Config, namespace, node string) (*LonghornManager, error) {
	pod, err := longhornpod.New(cfg, namespace, node, 1000, 2000)
	if err != nil {
		return nil, err
	}
	return &LonghornManager{Pod: pod, Scheduler: scheduler.NewReplicaScheduler(pod.DataStore)}, nil
}

// DefaultManagerPods is how many longhorn-manager pods the simulation runs
// when Options.ManagerPods is zero.
const DefaultManagerPods = 3

// managerPods are the simulated longhorn-manager pods. A cluster runs one
// per node; the simulation runs fewer, each standing for the pods of every
// len(pods)-th node and sharing one datastore between them, so volumes
// owned by nodes of different pods are placed from different, independently
// stale views, as in a cluster.
type managerPods struct {
	pods  []*LonghornManager
	nodes []string
	// ready is closed once every pod's datastore has synced.
	ready chan struct{}
}

// newManagerPods builds n pods (at least one, at most one per node) over
// the simulated nodes.
func newManagerPods(cfg *rest.Config, namespace string, nodes []string, n int) (*managerPods, error) {
	if len(nodes) == 0 {
		return nil, errors.New("the simulated Longhorn's volume controller needs at least one node")
	}
	n = max(1, min(n, len(nodes)))
	g := &managerPods{nodes: nodes, ready: make(chan struct{})}
	for i := range n {
		p, err := newManagerPod(cfg, namespace, nodes[i])
		if err != nil {
			return nil, err
		}
		g.pods = append(g.pods, p)
	}
	return g, nil
}

// Start runs every pod's informers until ctx ends (a manager.Runnable).
func (g *managerPods) Start(ctx context.Context) error {
	for _, p := range g.pods {
		if err := p.Start(ctx); err != nil {
			return err
		}
	}
	close(g.ready)
	<-ctx.Done()
	return nil
}

// ownerID returns the node whose longhorn-manager is responsible for v, as
// Longhorn picks a volume's status.ownerID: the node it is attached to, else
// its current owner, else a node chosen by the volume's name.
func (g *managerPods) ownerID(v *lhv1.Volume) string {
	for _, id := range []string{v.Spec.NodeID, v.Status.OwnerID} {
		if slices.Contains(g.nodes, id) {
			return id
		}
	}
	return g.nodes[spread(v.Name, len(g.nodes))]
}

// spread maps a name to one of n places, the same one every time.
func spread(name string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return int(h.Sum32() % uint32(n))
}

// owner waits until the pods' datastores have synced and returns the pod
// responsible for v, with the owner ID it writes into v's status.
func (g *managerPods) owner(ctx context.Context, v *lhv1.Volume) (*LonghornManager, string, error) {
	if err := g.wait(ctx); err != nil {
		return nil, "", err
	}
	id := g.ownerID(v)
	return g.pods[slices.Index(g.nodes, id)%len(g.pods)], id, nil
}

// forName waits until the pods' datastores have synced and returns the pod
// responsible for the object of the given name (Longhorn spreads the
// ownership of objects without a node of their own over its pods).
func (g *managerPods) forName(ctx context.Context, name string) (*LonghornManager, error) {
	if err := g.wait(ctx); err != nil {
		return nil, err
	}
	return g.pods[spread(name, len(g.pods))], nil
}

// wait waits until every pod's datastore has synced or ctx ends.
func (g *managerPods) wait(ctx context.Context) error {
	select {
	case <-g.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// LogLonghornTo sends the log lines of Longhorn's own code to w:
// longhorn-manager logs through logrus's standard logger, which belongs to
// the process, so the process that runs the simulation chooses where they go.
func LogLonghornTo(w io.Writer) { logrus.SetOutput(w) }
