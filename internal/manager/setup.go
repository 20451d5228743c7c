package manager

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/longhorn/diskschedule/internal/controller/config"
	"github.com/longhorn/diskschedule/internal/controller/diskschedule"
	"github.com/longhorn/diskschedule/internal/controller/longhornversion"
	"github.com/longhorn/diskschedule/internal/controller/mirror"
	"github.com/longhorn/diskschedule/internal/controller/node"
	"github.com/longhorn/diskschedule/internal/extender"
	"github.com/longhorn/diskschedule/internal/extender/packing"
	"github.com/longhorn/diskschedule/internal/gate"
	"github.com/longhorn/diskschedule/internal/index"
	"github.com/longhorn/diskschedule/internal/leader"
	"github.com/longhorn/diskschedule/internal/metrics"
	"github.com/longhorn/diskschedule/internal/podmutator"
)

// setup registers the indexes, the controllers, the extender and the
// health checks; identity is this replica's leader-election identity when
// its gate follows the Lease.
func setup(mgr ctrl.Manager, opts Options, cert *gate.Certificate, identity string) error {
	if err := index.Register(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	store := config.NewStore()
	reconcilers := []interface{ SetupWithManager(ctrl.Manager) error }{
		config.NewReconciler(mgr.GetClient(), mgr.GetEventRecorder("diskschedule-config"), store, opts.Namespace,
			metrics.NewConfig(ctrlmetrics.Registry)),
		diskschedule.NewReconciler(mgr.GetClient(), mgr.GetEventRecorder("diskschedule-ledger"), opts.Clock,
			metrics.NewLedger(ctrlmetrics.Registry), opts.LedgerWorkers, store),
		node.NewReconciler(mgr.GetClient(), mgr.GetEventRecorder("diskschedule-node")),
		mirror.NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), mgr.GetEventRecorder("diskschedule-mirror"), opts.Clock, opts.GateGrace,
			metrics.NewMirror(ctrlmetrics.Registry)),
		longhornversion.NewReconciler(mgr.GetClient(), mgr.GetEventRecorder("diskschedule-longhorn-version"), opts.Namespace,
			metrics.NewLonghorn(ctrlmetrics.Registry)),
	}
	for _, r := range reconcilers {
		if err := r.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up %T: %w", r, err)
		}
	}

	if opts.ExtenderBindAddress != "" {
		extenderMetrics := metrics.NewExtender(ctrlmetrics.Registry)
		clk, ok := opts.Clock.(clock.WithTicker)
		if !ok {
			clk = clock.RealClock{}
		}
		var lease types.NamespacedName
		if opts.LeaderElection {
			lease = types.NamespacedName{Namespace: opts.Namespace, Name: opts.LeaderElectionID}
		}
		ext := extender.New(extender.Options{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Informers: mgr.GetCache(),
			Namespace: opts.Namespace, Config: store, Clock: clk, Metrics: extenderMetrics, Budget: packing.DefaultBudget,
			Fence: opts.ExtenderFence, Lease: lease,
		})
		srv := extender.NewServer(ext, extender.ServerOptions{Addr: opts.ExtenderBindAddress,
			AdvertiseIP: opts.AdvertiseIP, NodeName: opts.NodeName, CertDir: opts.ExtenderCertDir,
			ClientCAFile: opts.ExtenderClientCAFile, Bind: opts.ExtenderBind,
			MaxInFlight: opts.ExtenderMaxInFlight, MaxInFlightBinds: opts.ExtenderMaxInFlightBinds})
		if err := mgr.Add(srv); err != nil {
			return fmt.Errorf("adding the scheduler extender: %w", err)
		}
		if opts.ExtenderRotateCertificates {
			certs := extender.Certificates{Namespace: opts.Namespace, CertDir: opts.ExtenderCertDir,
				ClientDir: filepath.Dir(opts.ExtenderClientCAFile)}
			if err := certs.SetupWithManager(mgr); err != nil {
				return fmt.Errorf("adding the scheduler extender's certificates: %w", err)
			}
		}
	}

	var ready []func() error
	if cert != nil {
		if err := cert.SetupWithManager(mgr); err != nil {
			return err
		}
		var lease *leader.Lease
		if opts.LeaderElection {
			lease = leader.NewLease(opts.LeaderElectionID, opts.RetryPeriod, clock.RealClock{}, mgr.GetLogger().WithName("leader"))
			if identity != "" {
				prober := &leader.Prober{TLS: cert.ClientTLS}
				lease.WithProbe(identity, prober.Probe)
				mgr.GetWebhookServer().Register(leader.ProbePath, leader.Handler(identity, lease))
			}
		}
		g := gate.New(mgr, metrics.NewGate(ctrlmetrics.Registry), opts.Namespace, opts.Gate.DecisionTimeout, lease)
		if opts.OnGateDenied != nil {
			g.OnDenied(opts.OnGateDenied)
		}
		if err := g.SetupWithManager(mgr); err != nil {
			return err
		}
		ready = append(ready, cert.Ready, g.Ready)
		pods, err := setupPodWebhook(mgr, opts)
		if err != nil {
			return err
		}
		ready = append(ready, pods)
	}

	if opts.HealthProbeBindAddress != "" && opts.HealthProbeBindAddress != "0" {
		if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
			return fmt.Errorf("adding the health check: %w", err)
		}
		check := func(*http.Request) error {
			for _, r := range ready {
				if err := r(); err != nil {
					return err
				}
			}
			return nil
		}
		if err := mgr.AddReadyzCheck("readyz", check); err != nil {
			return fmt.Errorf("adding the ready check: %w", err)
		}
	}
	return nil
}

// setupPodWebhook registers the pod opt-in webhook (diskschedule-pods) on
// the gate's webhook server, and the warm-up of the informers it reads;
// it returns the webhook's ready check.
func setupPodWebhook(mgr ctrl.Manager, opts Options) (func() error, error) {
	h, err := podmutator.NewHandler(podmutator.Options{
		Cache: mgr.GetClient(), API: mgr.GetAPIReader(), Decoder: admission.NewDecoder(mgr.GetScheme()),
		SecondaryScheduler: opts.SecondaryScheduler, Metrics: metrics.NewPodWebhook(ctrlmetrics.Registry),
		Log: mgr.GetLogger().WithName("pod-webhook"),
	})
	if err != nil {
		return nil, err
	}
	warm := &podmutator.Warm{Cache: mgr.GetCache()}
	if err := mgr.Add(warm); err != nil {
		return nil, fmt.Errorf("adding the pod webhook's informers: %w", err)
	}
	mgr.GetWebhookServer().Register(podmutator.Path, &webhook.Admission{Handler: h})
	return warm.Ready, nil
}
