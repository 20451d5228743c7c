// Command manager runs diskschedule: the DiskSchedule ledger and the
// controllers that write to it (mode "manager", a leader-elected
// Deployment), or the per-node disk monitor (mode "disk-monitor", a DaemonSet).
package main

import (
	"flag"
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/longhorn/diskschedule/internal/manager"
	"github.com/longhorn/diskschedule/internal/scheme"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	opts := manager.Options{}
	flag.StringVar(&opts.Namespace, "namespace", envOr("POD_NAMESPACE", "longhorn-system"),
		"The system namespace holding the longhorn.io objects.")
	flag.StringVar(&opts.MetricsBindAddress, "metrics-bind-address", ":8080",
		"The address the Prometheus /metrics endpoint binds to; 0 disables it.")
	flag.StringVar(&opts.HealthProbeBindAddress, "health-probe-bind-address", ":8081",
		"The address the /healthz and /readyz endpoints bind to.")
	flag.BoolVar(&opts.LeaderElection, "leader-elect", false,
		"Elect a leader, so that only one manager of the deployment runs the controllers.")
	flag.StringVar(&opts.ExtenderBindAddress, "extender-bind-address", ":9504",
		"The address the kube-scheduler extender binds to (on the leader, while scheduler-extender-enabled is true); empty disables it.")
	opts.AdvertiseIP = os.Getenv("POD_IP")
	opts.NodeName = os.Getenv("NODE_NAME")
	flag.IntVar(&opts.LedgerWorkers, "ledger-workers", 4, "How many DiskSchedules are decided in parallel.")
	mode := flag.String("mode", "manager", "What to run: manager (the controllers, one leader per cluster) or disk-monitor (one per node).")
	nodeName := flag.String("node-name", os.Getenv("NODE_NAME"), "In disk-monitor mode, the node whose disks are measured.")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()

	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")

	switch *mode {
	case "manager":
	case "disk-monitor":
		if *nodeName == "" {
			return fmt.Errorf("--node-name (or $NODE_NAME) is required in disk-monitor mode")
		}
		opts.DiskMonitor = &manager.DiskMonitorOptions{NodeName: *nodeName}
		opts.LeaderElection = false
	default:
		return fmt.Errorf("--mode must be manager or disk-monitor, not %q", *mode)
	}

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading the kubeconfig: %w", err)
	}
	s, err := scheme.New()
	if err != nil {
		return err
	}
	mgr, err := manager.New(cfg, s, opts)
	if err != nil {
		return err
	}
	log.Info("Starting", "mode", *mode, "namespace", opts.Namespace, "leaderElection", opts.LeaderElection)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		return fmt.Errorf("running the manager: %w", err)
	}
	return nil
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
