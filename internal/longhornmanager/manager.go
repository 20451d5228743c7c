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

	"github.com/longhorn/diskschedule/internal/longhornpod"
)

// Controllers names the longhorn-manager controllers every Manager runs, as
// the sandbox's log lists them.
var Controllers = []string{"longhorn-volume", "longhorn-replica", "longhorn-engine"}

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
func Start(ctx context.Context, cfg *rest.Config, namespace, node string, log logrus.FieldLogger) (*Manager, error) {
	pod, err := longhornpod.New(cfg, namespace, node, lhtypes.KubeAPIQPS, lhtypes.KubeAPIBurst)
	if err != nil {
		return nil, err
	}
	if err := pod.Start(ctx); err != nil {
		return nil, err
	}
	kube := pod.Kube
	scheme := runtime.NewScheme()
	if err := lhv1.SchemeBuilder.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("longhorn-manager on %s: scheme: %w", node, err)
	}
	log = log.WithField("node", node)
	ds := pod.DataStore
	proxyConns := lhutil.NewAtomicCounter()
	volumes, err := controller.NewVolumeController(log, ds, scheme, kube, namespace, node, "", proxyConns)
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
	// The controllers registered their handlers on informers that already
	// run: a shared informer hands a late handler everything it holds.
	go volumes.Run(Workers, ctx.Done())
	go replicas.Run(Workers, ctx.Done())
	go engines.Run(Workers, ctx.Done())
	return &Manager{Pod: pod}, nil
}
