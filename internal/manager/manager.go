// Package manager assembles diskschedule's controller manager: every
// controller, the cache indexes, the default settings and the metrics, from
// one Options value. cmd/main.go, the sandbox and the tests all build the
// manager here, so they run the same thing.
package manager

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/longhorn/diskschedule/internal/controller/backingimage"
	"github.com/longhorn/diskschedule/internal/controller/diskschedule"
	"github.com/longhorn/diskschedule/internal/controller/node"
	"github.com/longhorn/diskschedule/internal/controller/replica"
	"github.com/longhorn/diskschedule/internal/controller/setting"
	"github.com/longhorn/diskschedule/internal/controller/volume"
	"github.com/longhorn/diskschedule/internal/diskmonitor"
	"github.com/longhorn/diskschedule/internal/extender"
	"github.com/longhorn/diskschedule/internal/extender/packing"
	"github.com/longhorn/diskschedule/internal/index"
	"github.com/longhorn/diskschedule/internal/metrics"
)

// Options configures the manager.
type Options struct {
	// Namespace is the system namespace holding every longhorn.io object.
	Namespace string
	// MetricsBindAddress serves /metrics; "0" disables it.
	MetricsBindAddress string
	// HealthProbeBindAddress serves /healthz and /readyz; "" or "0" disables it.
	HealthProbeBindAddress string
	// LeaderElection makes only one manager of the deployment run the controllers.
	LeaderElection bool
	// LeaderElectionID names the Lease used for leader election.
	LeaderElectionID string
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election; zero keeps the defaults.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// LedgerWorkers is how many DiskSchedules are decided in parallel.
	LedgerWorkers int
	// Clock is the time source of the ledger (reservation expiry); nil is the real clock.
	Clock clock.PassiveClock
	// SkipControllerNameValidation allows several managers in one process (tests, sandbox).
	SkipControllerNameValidation bool
	// ExtenderBindAddress is where the kube-scheduler extender listens (on the
	// leader, while the scheduler-extender-enabled setting is true); "" disables it.
	ExtenderBindAddress string
	// AdvertiseIP is this manager's pod IP, written into the extender
	// Service's EndpointSlice when it leads; "" leaves the EndpointSlice alone.
	AdvertiseIP string
	// NodeName is the node this manager runs on, for the extender heartbeat.
	NodeName string
	// DiskMonitor, when set, runs the per-node disk monitor instead of the controllers.
	DiskMonitor *DiskMonitorOptions
}

// DiskMonitorOptions configures the per-node disk monitor mode.
type DiskMonitorOptions struct {
	// NodeName is the node whose disks are measured.
	NodeName string
	// Source measures the disks; nil measures them with statfs.
	Source diskmonitor.Source
	// Interval is the time between measurements; zero is 30 seconds.
	Interval time.Duration
}

// DefaultLeaderElectionID is the Lease name of the manager's leader election.
const DefaultLeaderElectionID = "longhorn-diskschedule-manager"

// New builds a manager with every controller registered. Start it with Start.
func New(cfg *rest.Config, s *runtime.Scheme, opts Options) (ctrl.Manager, error) {
	if opts.LeaderElectionID == "" {
		opts.LeaderElectionID = DefaultLeaderElectionID
	}
	if opts.LedgerWorkers <= 0 {
		opts.LedgerWorkers = 4
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	mgrOpts := ctrl.Options{
		Scheme:                  s,
		Metrics:                 metricsserver.Options{BindAddress: opts.MetricsBindAddress},
		HealthProbeBindAddress:  opts.HealthProbeBindAddress,
		LeaderElection:          opts.LeaderElection,
		LeaderElectionID:        opts.LeaderElectionID,
		LeaderElectionNamespace: opts.Namespace,
		// The manager exits on losing the lease, so it may release it on a
		// clean stop and let the next leader start at once.
		LeaderElectionReleaseOnCancel: true,
		// Longhorn objects live in the system namespace; the extender follows
		// pods and claims in every namespace.
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{opts.Namespace: {}},
			ByObject: map[client.Object]cache.ByObject{
				&corev1.Pod{}:                   {Namespaces: map[string]cache.Config{cache.AllNamespaces: {}}},
				&corev1.PersistentVolumeClaim{}: {Namespaces: map[string]cache.Config{cache.AllNamespaces: {}}},
			},
		},
		Client: client.Options{Cache: &client.CacheOptions{Unstructured: false}},
	}
	if opts.LeaseDuration > 0 {
		mgrOpts.LeaseDuration = ptr.To(opts.LeaseDuration)
	}
	if opts.RenewDeadline > 0 {
		mgrOpts.RenewDeadline = ptr.To(opts.RenewDeadline)
	}
	if opts.RetryPeriod > 0 {
		mgrOpts.RetryPeriod = ptr.To(opts.RetryPeriod)
	}
	if opts.SkipControllerNameValidation {
		mgrOpts.Controller = config.Controller{SkipNameValidation: ptr.To(true)}
	}
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	if opts.DiskMonitor != nil {
		if err := mgr.Add(newDiskMonitor(mgr, opts)); err != nil {
			return nil, fmt.Errorf("adding the disk monitor: %w", err)
		}
		return mgr, nil
	}
	if err := setup(mgr, opts); err != nil {
		return nil, err
	}
	return mgr, nil
}

func newDiskMonitor(mgr ctrl.Manager, opts Options) *diskmonitor.Monitor {
	source := opts.DiskMonitor.Source
	if source == nil {
		source = diskmonitor.Statfs{}
	}
	interval := opts.DiskMonitor.Interval
	if interval <= 0 {
		interval = 30 * time.Second
	}
	return diskmonitor.New(mgr.GetClient(), source, opts.Clock, opts.Namespace, opts.DiskMonitor.NodeName, interval)
}

func setup(mgr ctrl.Manager, opts Options) error {
	ctx := context.Background()
	if err := index.Register(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	ledgerMetrics := metrics.NewLedger(ctrlmetrics.Registry)
	extenderMetrics := metrics.NewExtender(ctrlmetrics.Registry)

	reconcilers := []interface{ SetupWithManager(ctrl.Manager) error }{
		setting.NewReconciler(mgr.GetClient(), mgr.GetEventRecorder("longhorn-setting-controller")),
		diskschedule.NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), opts.Clock, ledgerMetrics, opts.LedgerWorkers),
		node.NewReconciler(mgr.GetClient(), mgr.GetEventRecorder("longhorn-node-controller"), opts.Clock, opts.Namespace),
		replica.NewReconciler(mgr.GetClient(), mgr.GetAPIReader()),
		volume.NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), mgr.GetEventRecorder("longhorn-volume-controller"), 4),
		backingimage.NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), mgr.GetEventRecorder("longhorn-backing-image-controller")),
	}
	for _, r := range reconcilers {
		if err := r.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up %T: %w", r, err)
		}
	}

	if opts.ExtenderBindAddress != "" {
		ext := extender.New(mgr.GetClient(), mgr.GetAPIReader(), opts.Namespace, opts.Clock, extenderMetrics, packing.DefaultBudget)
		srv := extender.NewServer(ext, mgr.GetClient(), mgr.GetAPIReader(), extenderMetrics, opts.Namespace,
			opts.ExtenderBindAddress, opts.AdvertiseIP, opts.NodeName)
		if err := mgr.Add(srv); err != nil {
			return fmt.Errorf("adding the scheduler extender: %w", err)
		}
	}

	// Every replica of the deployment makes sure the default settings exist;
	// creating one that exists is a no-op.
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		return setting.EnsureDefaults(ctx, mgr.GetClient(), opts.Namespace)
	})); err != nil {
		return fmt.Errorf("adding the default settings: %w", err)
	}
	if opts.HealthProbeBindAddress != "" && opts.HealthProbeBindAddress != "0" {
		if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
			return fmt.Errorf("adding the health check: %w", err)
		}
		if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
			return fmt.Errorf("adding the ready check: %w", err)
		}
	}
	return nil
}
