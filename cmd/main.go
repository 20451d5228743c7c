// Command manager runs diskschedule next to Longhorn: the DiskSchedule
// ledger, the controllers that keep it equal to what Longhorn persisted and
// the kube-scheduler extender, as a leader-elected Deployment in Longhorn's
// namespace. It exits with a message when Longhorn's CRDs are missing or
// its namespace is not Longhorn's (manager.LonghornMissing).
//
// `manager uninstall` takes the add-on off the cluster in the order that
// keeps Longhorn writing (internal/uninstall): its webhook configurations
// first, and the DiskSchedule CRD only when it carries the add-on's label.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/longhorn/diskschedule/internal/controller/longhornversion"
	"github.com/longhorn/diskschedule/internal/controller/mirror"
	"github.com/longhorn/diskschedule/internal/extender"
	"github.com/longhorn/diskschedule/internal/gate"
	"github.com/longhorn/diskschedule/internal/manager"
	"github.com/longhorn/diskschedule/internal/scheme"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "uninstall" {
		if err := runUninstall(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if err := run(); err != nil {
		if manager.IsMissingCRDs(err) {
			fmt.Fprintf(os.Stderr, "diskschedule cannot start: %v\n", err)
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	opts := manager.Options{}
	var metricsCertPath string
	flag.StringVar(&opts.Namespace, "namespace", envOr("POD_NAMESPACE", "longhorn-system"),
		"Longhorn's namespace, holding Longhorn's objects, the DiskSchedules and the ConfigMap diskschedule-config.")
	flag.StringVar(&opts.MetricsBindAddress, "metrics-bind-address", "0",
		"The address the /metrics endpoint binds to, e.g. :8443 (HTTPS) or :8080 (HTTP with --metrics-secure=false); 0 disables it.")
	flag.BoolVar(&opts.MetricsSecure, "metrics-secure", true,
		"Serve /metrics over HTTPS behind authentication and authorization; false serves plain HTTP.")
	flag.StringVar(&metricsCertPath, "metrics-cert-path", "",
		"The directory holding the metrics server's certificate; empty makes a self-signed one.")
	flag.StringVar(&opts.MetricsCertName, "metrics-cert-name", "tls.crt", "The metrics server's certificate file name.")
	flag.StringVar(&opts.MetricsKeyName, "metrics-cert-key", "tls.key", "The metrics server's key file name.")
	flag.BoolVar(&opts.EnableHTTP2, "enable-http2", false,
		"Enable HTTP/2 for the metrics and webhook servers (off by default against HTTP/2 stream cancellation and rapid reset).")
	flag.StringVar(&opts.HealthProbeBindAddress, "health-probe-bind-address", ":8081",
		"The address the /healthz and /readyz endpoints bind to.")
	flag.BoolVar(&opts.LeaderElection, "leader-elect", false,
		"Elect a leader, so that only one manager of the deployment runs the controllers and the extender.")
	flag.IntVar(&opts.LedgerWorkers, "ledger-workers", 4, "How many DiskSchedules are decided in parallel.")
	flag.StringVar(&opts.ExtenderBindAddress, "extender-bind-address", ":9504",
		"The address the kube-scheduler extender binds to (on the leader, while scheduler-extender-enabled is true); empty disables it.")
	flag.DurationVar(&opts.ExtenderFence, "extender-fence", extender.DefaultFence,
		"How long a new leader answers no filter after taking over from another, so the pods the old leader let through bind first; at least kube-scheduler's extender httpTimeout.")
	flag.StringVar(&opts.ExtenderCertDir, "extender-cert-dir", defaultExtenderCertDir,
		"The directory with the extender's tls.crt and tls.key, reloaded when they change: the extender serves HTTPS only, and not before they are there.")
	flag.StringVar(&opts.ExtenderClientCAFile, "extender-client-ca-file", filepath.Join(defaultExtenderCertDir, "client", "ca.crt"),
		"The CA bundle its callers' client certificates must be signed by (kube-scheduler's extender tlsConfig certFile and keyFile), reloaded when it changes; a caller without one is refused in the TLS handshake.")
	flag.BoolVar(&opts.ExtenderRotateCertificates, "extender-rotate-certificates", true,
		"The leader fills and rotates the Secrets "+extender.ServingSecretName+" (the extender's serving certificate) and "+extender.ClientSecretName+
			" (the schedulers' client certificate), which the install mounts at --extender-cert-dir and beside --extender-client-ca-file; false when another issuer keeps those files.")
	flag.BoolVar(&opts.ExtenderBind, "extender-bind", false,
		"Serve the extender's /bind: kube-scheduler's extender configuration sets bindVerb. Otherwise /bind is answered 404.")
	flag.IntVar(&opts.ExtenderMaxInFlight, "extender-max-in-flight", extender.DefaultMaxInFlight,
		"How many /filter and /prioritize requests the extender serves at once; beyond it, 429 (each kube-scheduler sends one at a time).")
	flag.IntVar(&opts.ExtenderMaxInFlightBinds, "extender-max-in-flight-binds", extender.DefaultMaxInFlightBinds,
		"How many /bind requests the extender serves at once; beyond it, 429.")
	flag.DurationVar(&opts.GateGrace, "gate-grace", mirror.DefaultGrace,
		"How long a ledger entry that nothing Longhorn persisted backs is kept before it is released.")
	gateOpts := manager.GateOptions{}
	serveGate := true
	flag.BoolVar(&serveGate, "gate", true,
		"Serve the admission gate (diskschedule-gate) on this replica: Longhorn's writes that take disk space ask the ledger first.")
	flag.IntVar(&gateOpts.Port, "webhook-port", 9443, "The port the gate's webhook server listens on.")
	flag.StringVar(&gateOpts.TLS.CertDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs",
		"The directory the gate's certificate is written to from its Secret.")
	flag.StringVar(&gateOpts.TLS.SecretName, "webhook-secret-name", gate.DefaultSecretName,
		"The Secret, in the manager's namespace, that holds the gate's CA and certificate (created empty by the install).")
	flag.StringVar(&gateOpts.TLS.DNSName, "webhook-dns-name", "",
		"The name kube-apiserver calls the gate by (default longhorn-diskschedule-webhook-service.<namespace>.svc).")
	flag.StringVar(&gateOpts.ClientCAFile, "webhook-client-ca", "",
		"A PEM file of the CAs that sign kube-apiserver's webhook client certificate: the gate's webhook server then requires and verifies a client certificate, refusing other callers in the TLS handshake (read at start).")
	flag.DurationVar(&gateOpts.DecisionTimeout, "gate-timeout", gate.DefaultDecisionTimeout,
		"How long the gate waits for the ledger's decision; keep it under the webhook configuration's timeoutSeconds.")
	flag.BoolVar(&opts.SecondaryScheduler, "secondary-scheduler", false,
		"The second scheduler (diskschedule-scheduler, the chart's scheduler.enabled) is deployed: the pod opt-in webhook (diskschedule-pods) sets schedulerName on the pods it opts in that asked for the default scheduler.")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	opts.AdvertiseIP = os.Getenv("POD_IP")
	opts.NodeName = os.Getenv("NODE_NAME")
	if metricsCertPath != "" {
		opts.MetricsCertDir = filepath.Clean(metricsCertPath)
	}
	if serveGate {
		if gateOpts.TLS.DNSName == "" {
			gateOpts.TLS.DNSName = "longhorn-diskschedule-webhook-service." + opts.Namespace + ".svc"
		}
		opts.Gate = &gateOpts
	}
	if opts.GateGrace <= 0 {
		return fmt.Errorf("--gate-grace must be positive, not %s", opts.GateGrace)
	}

	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading the kubeconfig: %w", err)
	}
	s, err := scheme.New()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	why, err := manager.LonghornMissing(ctx, cfg, opts.Namespace)
	cancel()
	if err != nil {
		return err
	}
	if why != "" {
		return fmt.Errorf("not starting: %s", why)
	}
	if opts.Gate != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		why, err := manager.GateMissing(ctx, cfg, opts.Namespace, opts.Gate.TLS.SecretName)
		cancel()
		if err != nil {
			return err
		}
		if why != "" {
			log.Info("Starting without the admission gate: " + why + "; `helm install` or `make deploy` installs it (--gate=false skips this check)")
			opts.Gate = nil
			serveGate = false
		}
	}
	longhorn, err := readLonghornVersion(cfg, s, opts.Namespace)
	if err != nil {
		return err
	}
	// Without the DiskSchedule CRD (deleted, say) the manager waits, not
	// Ready, until it is served again, instead of exiting.
	signals := ctrl.SetupSignalHandler()
	if err := manager.WaitForDiskScheduleCRD(signals, cfg, opts.HealthProbeBindAddress, log); err != nil {
		return err
	}
	mgr, err := manager.New(cfg, s, opts)
	if err != nil {
		return err
	}
	log.Info("Starting", "namespace", opts.Namespace, "longhornVersion", longhorn, "leaderElection", opts.LeaderElection,
		"metrics", opts.MetricsBindAddress, "metricsSecure", opts.MetricsSecure, "gateGrace", opts.GateGrace.String(), "gate", serveGate,
		"secondaryScheduler", opts.SecondaryScheduler, "extenderBind", opts.ExtenderBind,
		"extenderCertDir", opts.ExtenderCertDir, "extenderClientCAFile", opts.ExtenderClientCAFile)
	if warning := longhornversion.Assessment(longhorn); warning != "" {
		log.Info("Warning: "+warning, "longhornVersion", longhorn)
	}
	if err := mgr.Start(signals); err != nil {
		return fmt.Errorf("running the manager: %w", err)
	}
	return nil
}

// readLonghornVersion reads Longhorn's Setting current-longhorn-version.
func readLonghornVersion(cfg *rest.Config, s *runtime.Scheme, namespace string) (string, error) {
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return "", fmt.Errorf("creating a client to read Longhorn's version: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return longhornversion.Read(ctx, c, namespace)
}

// defaultExtenderCertDir is where the manager's Deployment mounts the
// extender's Secrets.
const defaultExtenderCertDir = "/etc/diskschedule/extender"

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
