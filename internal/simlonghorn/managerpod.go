package simlonghorn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/longhorn/longhorn-manager/datastore"
	lhclientset "github.com/longhorn/longhorn-manager/k8s/pkg/client/clientset/versioned"
	"github.com/longhorn/longhorn-manager/scheduler"
	lhutil "github.com/longhorn/longhorn-manager/util"
	apiextensionsclientset "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// informerResync is the resync period of a simulated longhorn-manager
// pod's informers: longhorn-manager's own (30 s), which is also when its
// volume controller looks again at a volume it dropped from its queue.
const informerResync = 30 * time.Second

// managerPod is one simulated longhorn-manager pod: Longhorn v1.12.0's own
// datastore, with informers of its own on the API server (so its view is as
// stale as a real pod's), and Longhorn's own replica scheduler over it.
type managerPod struct {
	// node is the node the pod runs on, its controller ID (the value of
	// a volume's status.ownerID it is responsible for).
	node      string
	ds        *datastore.DataStore
	scheduler *scheduler.ReplicaScheduler
	factories *lhutil.InformerFactories
}

// newManagerPod builds the pod's clients, informers, datastore and
// scheduler; start runs the informers.
func newManagerPod(cfg *rest.Config, namespace, node string) (*managerPod, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "longhorn-manager/" + node
	// longhorn-manager's own client rates are far above client-go's
	// defaults; the simulated pods must not be throttled by the defaults.
	cfg.QPS, cfg.Burst = 1000, 2000
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("longhorn-manager on %s: Kubernetes client: %w", node, err)
	}
	lh, err := lhclientset.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("longhorn-manager on %s: Longhorn client: %w", node, err)
	}
	ext, err := apiextensionsclientset.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("longhorn-manager on %s: apiextensions client: %w", node, err)
	}
	factories := lhutil.NewInformerFactories(namespace, kube, lh, informerResync)
	ds := datastore.NewDataStore(namespace, lh, kube, ext, factories)
	return &managerPod{node: node, ds: ds, scheduler: scheduler.NewReplicaScheduler(ds), factories: factories}, nil
}

// start runs the pod's informers until ctx ends and waits for their first
// lists, as longhorn-manager does before its controllers start.
func (p *managerPod) start(ctx context.Context) error {
	p.factories.Start(ctx.Done())
	if !p.ds.Sync(ctx.Done()) {
		if err := ctx.Err(); err != nil {
			return err
		}
		return errors.New("longhorn-manager on " + p.node + ": the datastore's caches did not sync")
	}
	return nil
}
