package simcluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/kubernetes-csi/external-provisioner/v6/pkg/capacity"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

// CSISidecarOptions configures the CSI sidecars.
type CSISidecarOptions struct {
	// Namespace is Longhorn's namespace, where the csi-provisioner
	// Deployment (csiDeployer) owns the CSIStorageCapacity objects.
	Namespace string
	// CSIEndpoint is the Unix socket where Longhorn v1.12.0's own CSI
	// Identity and Controller services serve (sandbox-longhorn's
	// --csi-socket), which the provisioner and the resizer call, as the
	// CSI sidecars call longhorn-csi-plugin.
	CSIEndpoint string
	// CapacityPollInterval is how often the external-provisioner
	// refreshes every CSIStorageCapacity object it publishes; zero is
	// DefaultCapacityPollInterval, the external-provisioner's default.
	CapacityPollInterval time.Duration
}

// CSISidecars are the CSI sidecars in front of Longhorn's CSI driver: the
// external-provisioner (csiProvisioner) with the storage capacity it
// publishes (capacityPublisher), and the external-resizer (resizer).
//
// They run in a process of their own (cmd/sandbox-csi), as the
// csi-provisioner and csi-resizer containers do in a cluster, and must be
// made (NewCSISidecars) before anything else in that process uses a
// client-go clientset: the provisioner's library registers Kubernetes'
// core types in client-go's global scheme each time a provision controller
// is made, and a read of that scheme at the same moment (every clientset
// request reads it) stops the process with a concurrent map access. The
// CSI driver's objects (csiDeployer) and the node plugins' registrations
// (csiNodeRegistrar) are the simulated cluster's (Options.CSI).
type CSISidecars struct {
	sim         *sim
	mgr         ctrl.Manager
	capacity    *capacityPublisher
	provisioner *csiProvisioner
	controller  *controller.ProvisionController
}

// NewCSISidecars makes the sidecars, with cfg's (administrator)
// credentials and a manager of scheme for the resizer, ready to Run until
// ctx ends. It makes the provisioner's provision controller first (see
// CSISidecars).
func NewCSISidecars(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, opts CSISidecarOptions) (*CSISidecars, error) {
	if opts.Namespace == "" || opts.CSIEndpoint == "" {
		return nil, errors.New("the CSI sidecars need Longhorn's namespace and its CSI driver's endpoint")
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the external provisioner's client: %w", err)
	}
	s := &CSISidecars{sim: &sim{namespace: opts.Namespace, csi: &csiConnection{endpoint: opts.CSIEndpoint}}}
	s.capacity = &capacityPublisher{sim: s.sim, config: cfg, pollInterval: opts.CapacityPollInterval}
	if s.capacity.pollInterval <= 0 {
		s.capacity.pollInterval = DefaultCapacityPollInterval
	}
	s.provisioner = &csiProvisioner{sim: s.sim, client: cs,
		identity: strconv.FormatInt(time.Now().UnixNano()/int64(time.Millisecond), 10) + "-" + strconv.Itoa(rand.IntN(10000)) + "-" + CSIDriver}
	s.provisioner.withCapacity.wrapped = s.provisioner
	ctx = klog.NewContext(ctx, ctrl.LoggerFrom(ctx).WithName("simcluster-csi-provisioner"))
	s.controller = controller.NewProvisionController(ctx, cs, CSIDriver, &s.provisioner.withCapacity,
		controller.LeaderElection(false),
		controller.Threadiness(provisionWorkers),
		controller.VolumeName(VolumeName),
		controller.RateLimiter(workqueue.NewTypedItemExponentialFailureRateLimiter[string](provisionRetryStart, provisionRetryMax)),
		controller.CreateProvisionedPVLimiter(workqueue.NewTypedItemExponentialFailureRateLimiter[string](provisionRetryStart, provisionRetryMax)),
		controller.FailedProvisionThreshold(0),
		controller.FailedDeleteThreshold(0),
	)
	if s.mgr, err = newManager(cfg, scheme); err != nil {
		return nil, fmt.Errorf("creating the CSI sidecars' manager: %w", err)
	}
	s.sim.client = s.mgr.GetClient()
	if err := registerIndexes(ctx, s.mgr.GetFieldIndexer()); err != nil {
		return nil, err
	}
	if err := (&resizer{sim: s.sim}).setup(s.mgr); err != nil {
		return nil, fmt.Errorf("setting up the external resizer: %w", err)
	}
	return s, nil
}

// Run runs the sidecars until ctx ends: the resizer's manager, the capacity
// controller (once the csi-provisioner Deployment that owns its objects
// exists) and the provisioner; then it closes the connection to the driver.
func (s *CSISidecars) Run(ctx context.Context) error {
	parent := ctx
	ctx, cancel := context.WithCancel(klog.NewContext(ctx, ctrl.LoggerFrom(ctx).WithName("simcluster-csi-provisioner")))
	defer cancel()
	defer s.sim.csi.close() //nolint:errcheck // nothing is left to call the driver
	var workers sync.WaitGroup
	var mgrErr error
	workers.Go(func() {
		if mgrErr = s.mgr.Start(ctx); mgrErr != nil {
			cancel()
		}
	})
	capacityController, err := s.capacity.start(ctx, &workers)
	if err == nil {
		err = s.provisioner.withCapacity.set(s.provisioner, capacityController)
	}
	if err == nil {
		s.controller.ControllerWaitGroup(&workers)
		s.controller.Run(ctx)
	}
	cancel()
	workers.Wait()
	switch {
	case mgrErr != nil:
		return fmt.Errorf("the external resizer stopped: %w", mgrErr)
	case err != nil && parent.Err() == nil:
		return err
	}
	return nil
}

// capacityWrapped is the provisioner the provision controller is made
// with: the capacity controller's provision wrapper around csiProvisioner
// (capacity.NewProvisionWrapper), which refreshes the capacity of a class
// after each of its volumes is provisioned, and answers for csiProvisioner
// whether it supports block volumes and should provision a claim. The
// controller is made before the capacity controller, which waits for its
// owner; the wrapper is set before the controller runs (CSISidecars.Run).
// Until then it is csiProvisioner alone.
type capacityWrapped struct {
	mu      sync.Mutex
	wrapped provisioner
}

// provisioner is what the provision controller asks of a provisioner, and
// of the capacity controller's wrapper.
type provisioner interface {
	controller.Provisioner
	controller.BlockProvisioner
	controller.Qualifier
}

var (
	_ provisioner = &capacityWrapped{}
	_ provisioner = &csiProvisioner{}
)

// set wraps p with the capacity controller c.
func (w *capacityWrapped) set(p *csiProvisioner, c *capacity.Controller) error {
	wrapped, ok := capacity.NewProvisionWrapper(p, c).(provisioner)
	if !ok {
		return errors.New("the capacity controller's provision wrapper does not answer whether block volumes are supported and a claim is to be provisioned")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.wrapped = wrapped
	return nil
}

func (w *capacityWrapped) get() provisioner {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.wrapped
}

// Provision provisions through the wrapper.
func (w *capacityWrapped) Provision(ctx context.Context, opts controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	return w.get().Provision(ctx, opts)
}

// Delete deletes through the wrapper.
func (w *capacityWrapped) Delete(ctx context.Context, pv *corev1.PersistentVolume) error {
	return w.get().Delete(ctx, pv)
}

// SupportsBlock answers through the wrapper.
func (w *capacityWrapped) SupportsBlock(ctx context.Context) bool { return w.get().SupportsBlock(ctx) }

// ShouldProvision answers through the wrapper.
func (w *capacityWrapped) ShouldProvision(ctx context.Context, claim *corev1.PersistentVolumeClaim) bool {
	return w.get().ShouldProvision(ctx, claim)
}
