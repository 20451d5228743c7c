package simcluster

import (
	"context"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-helpers/apimachinery/lease"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
)

// DefaultNodeLeaseDuration is the kubelet's default node lease duration
// (nodeLeaseDurationSeconds); the lease is renewed every quarter of it.
const DefaultNodeLeaseDuration = 40 * time.Second

// nodeLeases plays each simulated node's kubelet's heartbeat: the node's
// Lease in kube-node-lease, held by the node, owned by its Node and renewed
// every quarter of its duration by the kubelet's own lease controller, so
// that kube-controller-manager's node lifecycle controller sees the node
// alive and neither taints it nor evicts its pods.
type nodeLeases struct {
	sim      *sim
	client   kubernetes.Interface
	duration time.Duration
}

// newNodeLeases returns the heartbeats of the simulated nodes, reaching the
// API server with mgr's configuration.
func newNodeLeases(mgr ctrl.Manager, s *sim, duration time.Duration) (*nodeLeases, error) {
	cs, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return nil, fmt.Errorf("creating the node leases' client: %w", err)
	}
	if duration <= 0 {
		duration = DefaultNodeLeaseDuration
	}
	return &nodeLeases{sim: s, client: cs, duration: duration}, nil
}

// Start renews every simulated node's Lease until ctx ends or the node goes
// down (Options.Outages).
func (l *nodeLeases) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("simcluster-node-lease")
	ctx = klog.NewContext(ctx, log)
	seconds := int32(l.duration / time.Second)
	if seconds < 1 {
		seconds = 1
	}
	var wg sync.WaitGroup
	for _, n := range l.sim.nodes {
		c := lease.NewController(clock.RealClock{}, l.client, n.Name, seconds, nil, l.duration/4,
			n.Name, corev1.NamespaceNodeLease, l.setNodeOwner(ctx, n.Name))
		wg.Go(func() {
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			go func() {
				select {
				case <-l.sim.outages.stopped(n.Name):
					log.Info("The node went down: its lease is no longer renewed", "node", n.Name)
					cancel()
				case <-ctx.Done():
				}
			}()
			c.Run(ctx)
		})
	}
	log.Info("Renewing the simulated nodes' leases", "nodes", len(l.sim.nodes), "leaseDuration", l.duration)
	wg.Wait()
	return nil
}

// setNodeOwner returns the lease controller's hook that makes the node's
// Node the owner of its Lease, as the kubelet does, so the Lease goes with
// the Node. Until the Node exists, the Lease is not created.
func (l *nodeLeases) setNodeOwner(ctx context.Context, node string) lease.ProcessLeaseFunc {
	return func(ls *coordinationv1.Lease) error {
		if len(ls.OwnerReferences) > 0 {
			return nil
		}
		n, err := l.client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("getting node %s to own its lease: %w", node, err)
		}
		ls.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: corev1.SchemeGroupVersion.String(), Kind: "Node", Name: node, UID: n.UID,
		}}
		return nil
	}
}
