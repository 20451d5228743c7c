package extender

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/longhorn/diskschedule/internal/metrics"
)

// ServiceName is the selector-less Service kube-scheduler calls; the leader
// points its EndpointSlice at itself.
const ServiceName = "longhorn-scheduler-extender"

// Port is the extender's port.
const Port = 9504

// PortName names the extender's port in its Service and in the
// EndpointSlice the leader writes: kube-proxy routes a Service port to the
// endpoint port of the same name.
const PortName = "extender"

// ServerOptions say where and how the extender serves.
type ServerOptions struct {
	// Addr is the listen address.
	Addr string
	// AdvertiseIP, when set, is written into the Service's EndpointSlice.
	AdvertiseIP string
	// NodeName is the node this manager runs on, for the heartbeat.
	NodeName string
	// CertDir holds the extender's serving pair, tls.crt and tls.key,
	// reloaded when they change. The extender serves HTTPS only, and not
	// before both are there (a mounted Secret its rotator fills).
	CertDir string
	// ClientCAFile is the CA bundle a caller's client certificate must be
	// signed by (kube-scheduler's extender tlsConfig certFile and keyFile),
	// read again when it changes. A caller without one is refused in the
	// TLS handshake.
	ClientCAFile string
	// Bind serves POST /bind: kube-scheduler's extender configuration
	// sets bindVerb (HandlerOptions.Bind).
	Bind bool
	// MaxInFlight and MaxInFlightBinds cap the requests served at once
	// (HandlerOptions).
	MaxInFlight, MaxInFlightBinds int
}

// The extender's connection bounds. kube-scheduler sends a few headers and
// a body of at most maxArgsBytes at once, and waits for an answer at most
// its extender httpTimeout (10s in config/scheduler); a filter waits at
// most scheduler-extender-pod-scheduling-timeout (5s by default).
const (
	// readHeaderTimeout bounds the request line and headers: a client
	// that sends them slowly is cut off.
	readHeaderTimeout = 5 * time.Second
	// readTimeout bounds the whole request, its body read included.
	readTimeout = 15 * time.Second
	// writeTimeout bounds a request from its headers to the end of its
	// answer: far above httpTimeout, after which kube-scheduler no longer
	// reads the answer.
	writeTimeout = time.Minute
	// idleTimeout is kube-scheduler's transport keep-alive (net/http's
	// DefaultTransport IdleConnTimeout).
	idleTimeout = 90 * time.Second
	// maxHeaderBytes caps the request line and headers.
	maxHeaderBytes = 16 << 10
)

// Server serves the extender on the leader while scheduler-extender-enabled
// in the ConfigMap settings.ConfigMapName is true (the default).
type Server struct {
	extender  *Extender
	client    client.Client
	apiReader client.Reader
	metrics   *metrics.Extender
	namespace string
	opts      ServerOptions
	// poll is how often scheduler-extender-enabled is read.
	poll time.Duration
}

// NewServer returns the extender's leader-only runnable.
func NewServer(e *Extender, opts ServerOptions) *Server {
	return &Server{extender: e, client: e.opts.Client, apiReader: e.opts.APIReader, metrics: e.opts.Metrics,
		namespace: e.opts.Namespace, opts: opts, poll: time.Second}
}

// +kubebuilder:rbac:groups="",resources=pods;persistentvolumeclaims;persistentvolumes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=longhorn-system,resources=configmaps,resourceNames=diskschedule-config,verbs=get;list;watch
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get;list;watch
// The leader creates its Service's EndpointSlice once, then reads and
// updates it by name (create cannot be limited to a name).
// +kubebuilder:rbac:groups=discovery.k8s.io,namespace=longhorn-system,resources=endpointslices,verbs=create
// +kubebuilder:rbac:groups=discovery.k8s.io,namespace=longhorn-system,resources=endpointslices,resourceNames=longhorn-scheduler-extender,verbs=get;update
// +kubebuilder:rbac:groups=longhorn.io,namespace=longhorn-system,resources=diskschedules,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=longhorn.io,namespace=longhorn-system,resources=volumes;replicas;nodes;settings,verbs=get;list;watch

// NeedLeaderElection makes only the leader serve.
func (s *Server) NeedLeaderElection() bool { return true }

// Start starts the Extender and serves it while scheduler-extender-enabled
// is true and ctx lives. A failed read of the settings changes nothing.
func (s *Server) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("extender")
	if err := s.extender.Start(ctx); err != nil {
		return fmt.Errorf("starting the scheduler extender: %w", err)
	}
	var (
		srv       *http.Server
		tlsConfig *tls.Config
		waiting   string
	)
	heartbeat := s.metrics.Heartbeat.WithLabelValues(s.opts.NodeName)
	stop := func() {
		if srv == nil {
			return
		}
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
		srv = nil
		heartbeat.Set(0)
		log.Info("Stopped the scheduler extender")
	}
	defer stop()
	ticker := s.extender.opts.Clock.NewTicker(s.poll)
	defer ticker.Stop()
	logCtx := ctrl.LoggerInto(ctx, log)
	for {
		enabled, err := s.enabled(logCtx)
		switch {
		case err != nil:
			log.Error(err, "Reading the extender's settings")
		case enabled && srv == nil && tlsConfig == nil:
			// The certificates may not be there yet: a mounted Secret is
			// filled by the rotator after the pod starts.
			if tlsConfig, err = serverTLS(logCtx, s.opts.CertDir, s.opts.ClientCAFile); err != nil && err.Error() != waiting {
				waiting = err.Error()
				log.Info("The scheduler extender waits for its certificates", "reason", waiting)
			}
			if tlsConfig != nil {
				continue
			}
		case enabled && srv == nil:
			srv, err = s.serve(logCtx, tlsConfig)
			if err != nil {
				log.Error(err, "Starting the scheduler extender", "address", s.opts.Addr)
				break
			}
			heartbeat.Set(1)
			log.Info("Serving the scheduler extender over HTTPS, client certificates required", "address", s.opts.Addr,
				"certDir", s.opts.CertDir, "clientCAFile", s.opts.ClientCAFile)
			if err := s.publishEndpoint(ctx); err != nil {
				log.Error(err, "Pointing the extender's EndpointSlice at this manager")
			}
		case !enabled && srv != nil:
			stop()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
		}
	}
}

// enabled reads scheduler-extender-enabled in effect (true when the
// ConfigMap or the key is absent).
func (s *Server) enabled(ctx context.Context) (bool, error) {
	sched, err := s.extender.settings.get(ctx)
	if err != nil {
		return false, err
	}
	return sched.SchedulerExtenderEnabled, nil
}

func (s *Server) serve(ctx context.Context, tlsConfig *tls.Config) (*http.Server, error) {
	ln, err := net.Listen("tcp", s.opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", s.opts.Addr, err)
	}
	ln = tls.NewListener(ln, tlsConfig)
	srv := newHTTPServer(ctx, NewHandler(s.extender, HandlerOptions{FilterDuration: s.metrics.FilterDuration,
		Bind: s.opts.Bind, MaxInFlight: s.opts.MaxInFlight, MaxInFlightBinds: s.opts.MaxInFlightBinds}))
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			ctrl.LoggerFrom(ctx).Error(err, "Serving the scheduler extender")
		}
	}()
	return srv, nil
}

// newHTTPServer returns the extender's http.Server serving h, bounded by
// the constants above.
func newHTTPServer(ctx context.Context, h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
}

// publishEndpoint points the Service's EndpointSlice at this manager.
func (s *Server) publishEndpoint(ctx context.Context) error {
	if s.opts.AdvertiseIP == "" {
		return nil
	}
	want := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: ServiceName, Namespace: s.namespace, Labels: map[string]string{
			discoveryv1.LabelServiceName: ServiceName,
			discoveryv1.LabelManagedBy:   "diskschedule.longhorn.io",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{s.opts.AdvertiseIP},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			NodeName:   ptr.To(s.opts.NodeName),
		}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To(PortName), Port: ptr.To(int32(Port)), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	if net.ParseIP(s.opts.AdvertiseIP).To4() == nil {
		want.AddressType = discoveryv1.AddressTypeIPv6
	}
	cur := &discoveryv1.EndpointSlice{}
	err := s.apiReader.Get(ctx, client.ObjectKeyFromObject(want), cur)
	if apierrors.IsNotFound(err) {
		if err := s.client.Create(ctx, want); err != nil {
			return fmt.Errorf("creating EndpointSlice %s: %w", ServiceName, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading EndpointSlice %s: %w", ServiceName, err)
	}
	cur.Labels, cur.AddressType, cur.Endpoints, cur.Ports = want.Labels, want.AddressType, want.Endpoints, want.Ports
	if err := s.client.Update(ctx, cur); err != nil {
		return fmt.Errorf("updating EndpointSlice %s: %w", ServiceName, err)
	}
	return nil
}
