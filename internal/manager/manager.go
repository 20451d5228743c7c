// Package manager assembles diskschedule's controller manager from one
// Options value: the DiskSchedule, node, mirror and config controllers, the
// cache and its indexes, the metrics and the scheduler extender.
// cmd/main.go, the sandbox and the tests all build the manager here, so they
// run the same thing.
//
// The manager runs next to an unmodified Longhorn: it reads Longhorn's
// Nodes, Volumes, Replicas, BackingImages and Settings and never writes
// them. Its only writes are DiskSchedules, Events, its leader-election Lease
// and the extender Service's EndpointSlice. New checks first that Longhorn's
// CRDs serve longhorn.io/v1beta2 (CheckCRDs).
package manager

import (
	"crypto/tls"
	"fmt"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/longhorn/diskschedule/internal/controller/mirror"
	"github.com/longhorn/diskschedule/internal/extender"
	"github.com/longhorn/diskschedule/internal/gate"
	"github.com/longhorn/diskschedule/internal/leader"
	"github.com/longhorn/diskschedule/internal/settings"
)

// Options configures the manager.
type Options struct {
	// Namespace is Longhorn's namespace (longhorn-system), where Longhorn's
	// objects, the DiskSchedules and the ConfigMap diskschedule-config live.
	Namespace string
	// MetricsBindAddress serves /metrics; "" or "0" disables it.
	MetricsBindAddress string
	// MetricsSecure serves /metrics over HTTPS behind authentication and
	// authorization (TokenReview and SubjectAccessReview, as kubebuilder
	// scaffolds it); false serves plain HTTP to anyone.
	MetricsSecure bool
	// MetricsCertDir holds the metrics server's certificate (MetricsCertName)
	// and key (MetricsKeyName); empty makes a self-signed certificate.
	MetricsCertDir, MetricsCertName, MetricsKeyName string
	// EnableHTTP2 offers HTTP/2 on the metrics and webhook servers; they
	// offer HTTP/1.1 alone otherwise (disableHTTP2).
	EnableHTTP2 bool
	// HealthProbeBindAddress serves /healthz and /readyz; "" or "0" disables it.
	HealthProbeBindAddress string
	// LeaderElection makes only one manager of the deployment run the
	// controllers and the extender.
	LeaderElection bool
	// LeaderElectionID names the Lease used for leader election;
	// DefaultLeaderElectionID when empty.
	LeaderElectionID string
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election; zero keeps the defaults.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// LedgerWorkers is how many DiskSchedules are decided in parallel; 4 when not positive.
	LedgerWorkers int
	// GateGrace is how long a ledger entry that nothing Longhorn persisted
	// backs is kept before the mirror releases it (the gate writes a request
	// before Longhorn's write lands); mirror.DefaultGrace (30s) when not positive.
	GateGrace time.Duration
	// Clock is the time source of the ledger and the mirror; nil is the real clock.
	Clock clock.PassiveClock
	// SkipControllerNameValidation allows several managers in one process (tests, sandbox).
	SkipControllerNameValidation bool
	// ExtenderBindAddress is where the kube-scheduler extender listens (on the
	// leader, while scheduler-extender-enabled is true); "" disables it.
	ExtenderBindAddress string
	// OnGateDenied, when set, is called without waiting for every write
	// the gate denies on this replica (gate.Gate.OnDenied): the sandbox's
	// tests measure stalls from it.
	OnGateDenied func(obj client.Object, message string, at time.Time)
	// AdvertiseIP is this manager's pod IP, written into the extender
	// Service's EndpointSlice when it leads; "" leaves the EndpointSlice alone.
	AdvertiseIP string
	// NodeName is the node this manager runs on, for the extender heartbeat.
	NodeName string
	// ExtenderFence is how long a new leader answers no filter after taking
	// over from another; extender.DefaultFence when 0, none when negative.
	ExtenderFence time.Duration
	// ExtenderCertDir holds the extender's tls.crt and tls.key, and
	// ExtenderClientCAFile the CA its callers' client certificates must be
	// signed by: the extender serves HTTPS only, once both are there
	// (extender.ServerOptions).
	ExtenderCertDir, ExtenderClientCAFile string
	// ExtenderRotateCertificates makes the leader fill and rotate the
	// extender's Secrets (extender.ServingSecretName and
	// extender.ClientSecretName), mounted at ExtenderCertDir and beside
	// ExtenderClientCAFile; false when another issuer keeps those files.
	ExtenderRotateCertificates bool
	// ExtenderBind serves the extender's POST /bind: kube-scheduler's
	// extender configuration sets bindVerb. Otherwise /bind is answered 404.
	ExtenderBind bool
	// ExtenderMaxInFlight and ExtenderMaxInFlightBinds cap the extender's
	// /filter and /prioritize, and /bind, requests served at once; beyond
	// them it answers 429 (extender.DefaultMaxInFlight and
	// extender.DefaultMaxInFlightBinds when not positive).
	ExtenderMaxInFlight, ExtenderMaxInFlightBinds int
	// Gate serves the admission gate on this replica when set, and beside
	// it the pod opt-in webhook (diskschedule-pods); nil runs neither
	// (Longhorn's writes are then adopted by the mirror, rule 7).
	Gate *GateOptions
	// SecondaryScheduler says the second scheduler (diskschedule-scheduler)
	// is deployed: the pod opt-in webhook then sets schedulerName on the
	// pods it opts in that asked for the default scheduler.
	SecondaryScheduler bool
}

// GateOptions configures the admission gate's webhook server.
type GateOptions struct {
	// Host and Port are where the webhook server listens; Port is 9443 when 0.
	Host string
	Port int
	// TLS says how the serving certificate is kept.
	TLS gate.TLS
	// DecisionTimeout bounds each admission's wait for the ledger;
	// gate.DefaultDecisionTimeout when not positive.
	DecisionTimeout time.Duration
	// ClientCAFile, when set, is a PEM file of the CAs that sign
	// kube-apiserver's webhook client certificate (its
	// AdmissionConfiguration's kubeConfigFile): the webhook server then
	// requires a client certificate signed by one of them, and a caller
	// without one is refused in the TLS handshake, before any review is
	// read. It is read once, at start. The replicas' probes of the Lease
	// holder (internal/leader) present no client certificate, so they are
	// refused too and a holder is judged by its renewals and decisions
	// alone.
	ClientCAFile string
}

// DefaultLeaderElectionID is the Lease name of the manager's leader election.
const DefaultLeaderElectionID = "longhorn-diskschedule-manager"

// New checks that Longhorn's CRDs are installed (CheckCRDs) and builds a
// manager with every controller registered. Start it with Start.
func New(cfg *rest.Config, s *runtime.Scheme, opts Options) (ctrl.Manager, error) {
	if opts.Namespace == "" {
		return nil, fmt.Errorf("the manager needs Longhorn's namespace")
	}
	if err := CheckCRDs(cfg); err != nil {
		return nil, err
	}
	opts = withDefaults(opts)
	var cert *gate.Certificate
	if opts.Gate != nil {
		var err error
		if cert, err = gate.NewCertificate(opts.Namespace, opts.Gate.TLS); err != nil {
			return nil, err
		}
	}
	mgrOpts, err := managerOptions(s, opts, cert)
	if err != nil {
		return nil, err
	}
	var lock *leaseLock
	if opts.LeaderElection && cert != nil {
		// The gate on every replica follows the Lease; the identity names
		// where this replica's gate serves, so the others can ask it
		// whether it still decides (internal/leader).
		name, err := replicaName()
		if err != nil {
			return nil, err
		}
		if lock, err = newLeaseLock(cfg, opts, leader.Identity(name, gateAddress(opts))); err != nil {
			return nil, err
		}
		mgrOpts.LeaderElectionResourceLockInterface = lock
	}
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	identity := ""
	if lock != nil {
		lock.events.set(mgr.GetEventRecorderFor(lock.identity)) //nolint:staticcheck // resourcelock records with the old events API
		identity = lock.identity
	}
	if err := setup(mgr, opts, cert, identity); err != nil {
		return nil, err
	}
	return mgr, nil
}

func withDefaults(opts Options) Options {
	if opts.LeaderElectionID == "" {
		opts.LeaderElectionID = DefaultLeaderElectionID
	}
	if opts.LedgerWorkers <= 0 {
		opts.LedgerWorkers = 4
	}
	if opts.GateGrace <= 0 {
		opts.GateGrace = mirror.DefaultGrace
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.ExtenderFence == 0 {
		opts.ExtenderFence = extender.DefaultFence
	}
	if opts.MetricsBindAddress == "" {
		opts.MetricsBindAddress = "0"
	}
	return opts
}

// managerOptions returns controller-runtime's options for opts.
func managerOptions(s *runtime.Scheme, opts Options, cert *gate.Certificate) (ctrl.Options, error) {
	var tlsOpts []func(*tls.Config)
	if !opts.EnableHTTP2 {
		tlsOpts = append(tlsOpts, disableHTTP2)
	}
	metrics := metricsserver.Options{
		BindAddress:    opts.MetricsBindAddress,
		SecureServing:  opts.MetricsSecure,
		TLSOpts:        tlsOpts,
		FilterProvider: boundedMetrics(nil),
	}
	if opts.MetricsSecure {
		metrics.FilterProvider = boundedMetrics(filters.WithAuthenticationAndAuthorization)
	}
	if opts.MetricsCertDir != "" {
		metrics.CertDir, metrics.CertName, metrics.KeyName = opts.MetricsCertDir, opts.MetricsCertName, opts.MetricsKeyName
	}
	mgrOpts := ctrl.Options{
		Scheme:                  s,
		Metrics:                 metrics,
		HealthProbeBindAddress:  opts.HealthProbeBindAddress,
		LeaderElection:          opts.LeaderElection,
		LeaderElectionID:        opts.LeaderElectionID,
		LeaderElectionNamespace: opts.Namespace,
		// The manager exits on losing the lease, so it may release it on a
		// clean stop and let the next leader start at once.
		LeaderElectionReleaseOnCancel: true,
		// Longhorn's objects and the ledgers live in Longhorn's namespace;
		// of the ConfigMaps there only the extender's is read; the extender
		// follows pods and claims in every namespace.
		// Nothing reads managed fields: the cache drops them, so reading a
		// Longhorn object does not copy them.
		Cache: cache.Options{
			DefaultTransform:  cache.TransformStripManagedFields(),
			DefaultNamespaces: map[string]cache.Config{opts.Namespace: {}},
			ByObject: map[client.Object]cache.ByObject{
				&corev1.Pod{}:                   {Namespaces: map[string]cache.Config{cache.AllNamespaces: {}}},
				&corev1.PersistentVolumeClaim{}: {Namespaces: map[string]cache.Config{cache.AllNamespaces: {}}},
				&corev1.ConfigMap{}:             {Field: fields.OneTermEqualSelector("metadata.name", settings.ConfigMapName)},
			},
		},
		Client: client.Options{Cache: &client.CacheOptions{Unstructured: false}},
		// controller-runtime v0.24's priority queue can deadlock on shutdown
		// (kubernetes-sigs/controller-runtime#3538, fixed in v0.25, which
		// needs the Kubernetes 1.37 libraries): a manager losing or
		// releasing its lease would not stop. The classic work queue has no
		// such race.
		Controller: config.Controller{UsePriorityQueue: ptr.To(false)},
	}
	if cert != nil {
		port := opts.Gate.Port
		if port == 0 {
			port = defaultGatePort
		}
		clientCA, err := clientCAName(opts.Gate.TLS.CertDir, opts.Gate.ClientCAFile)
		if err != nil {
			return ctrl.Options{}, err
		}
		mgrOpts.WebhookServer = boundedWebhookServer{webhook.NewServer(webhook.Options{
			Host: opts.Gate.Host, Port: port, CertDir: opts.Gate.TLS.CertDir, ClientCAName: clientCA,
			TLSOpts: slices.Concat(tlsOpts, []func(*tls.Config){cert.TLSOption}),
		})}
		// Of the Secrets in the namespace only the gate's is read.
		mgrOpts.Cache.ByObject[&corev1.Secret{}] = cache.ByObject{Field: fields.OneTermEqualSelector("metadata.name", cert.SecretName())}
		if opts.LeaderElection {
			// The gate follows the leader-election Lease, by name, to
			// answer at once while no leader decides (internal/leader).
			mgrOpts.Cache.ByObject[&coordinationv1.Lease{}] = cache.ByObject{Field: fields.OneTermEqualSelector("metadata.name", opts.LeaderElectionID)}
		}
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
		mgrOpts.Controller.SkipNameValidation = ptr.To(true)
	}
	return mgrOpts, nil
}
