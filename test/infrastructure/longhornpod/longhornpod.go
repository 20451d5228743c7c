// Package longhornpod builds what one longhorn-manager pod reads through:
// Longhorn v1.12.0's own datastore.DataStore over informers of its own on
// the API server, so each pod's view is as stale as a real pod's. The test
// writers of test/framework/testenv/replicawriter place replicas from it, and
// test/infrastructure/longhornmanager runs Longhorn's own controllers and webhooks over
// it. It imports no Longhorn controller, so it links into either.
package longhornpod

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/longhorn/longhorn-manager/datastore"
	lhclientset "github.com/longhorn/longhorn-manager/k8s/pkg/client/clientset/versioned"
	lhutil "github.com/longhorn/longhorn-manager/util"
	apiextensionsclientset "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Resync is the resync period of a longhorn-manager pod's informers:
// longhorn-manager's own (30 s), which is also when its controllers look
// again at an object they dropped from their queues.
const Resync = 30 * time.Second

// Pod is one longhorn-manager pod's datastore.
type Pod struct {
	// Node is the node the pod runs on, its controller ID.
	Node string
	// DataStore is Longhorn's datastore of the pod.
	DataStore *datastore.DataStore
	// Informers are the informers DataStore reads.
	Informers *lhutil.InformerFactories
	// Kube is the pod's Kubernetes client, on the same configuration.
	Kube kubernetes.Interface
}

// New builds node's pod on cfg: its clients (user agent
// longhorn-manager/<node>, at the rates qps and burst), informers and
// datastore. Start runs the informers.
func New(cfg *rest.Config, namespace, node string, qps float32, burst int) (*Pod, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "longhorn-manager/" + node
	cfg.QPS, cfg.Burst = qps, burst
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
	factories := lhutil.NewInformerFactories(namespace, kube, lh, Resync)
	ds := datastore.NewDataStore(namespace, lh, kube, ext, factories)
	return &Pod{Node: node, DataStore: ds, Informers: factories, Kube: kube}, nil
}

// Start runs the pod's informers until ctx ends and waits for their first
// lists, as longhorn-manager does before its controllers start.
func (p *Pod) Start(ctx context.Context) error {
	p.Informers.Start(ctx.Done())
	if !p.DataStore.Sync(ctx.Done()) {
		if err := ctx.Err(); err != nil {
			return err
		}
		return errors.New("longhorn-manager on " + p.Node + ": the datastore's caches did not sync")
	}
	return nil
}
