package extender

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	longhornv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/metrics"
)

// ServiceName is the selector-less Service kube-scheduler calls; the leader
// points its EndpointSlice at itself.
const ServiceName = "longhorn-scheduler-extender"

// Port is the extender's port.
const Port = 9504

// Server serves the extender on the leader while the
// scheduler-extender-enabled setting is true.
type Server struct {
	extender  *Extender
	client    client.Client
	apiReader client.Reader
	metrics   *metrics.Extender
	namespace string
	addr      string
	// advertiseIP, when set, is written into the Service's EndpointSlice.
	advertiseIP string
	nodeName    string
	// poll is how often the setting is read.
	poll time.Duration
}

// NewServer returns the extender's leader-only runnable.
func NewServer(e *Extender, c client.Client, apiReader client.Reader, m *metrics.Extender, namespace, addr, advertiseIP, nodeName string) *Server {
	return &Server{extender: e, client: c, apiReader: apiReader, metrics: m, namespace: namespace, addr: addr,
		advertiseIP: advertiseIP, nodeName: nodeName, poll: time.Second}
}

// +kubebuilder:rbac:groups="",resources=pods;persistentvolumeclaims;persistentvolumes,verbs=get;list;watch
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=longhorn.io,resources=diskschedules,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=longhorn.io,resources=volumes;replicas;nodes;settings,verbs=get;list;watch

// NeedLeaderElection makes only the leader serve.
func (s *Server) NeedLeaderElection() bool { return true }

// Start serves while the setting is true and ctx lives.
func (s *Server) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("extender")
	s.extender.background = ctrl.LoggerInto(ctx, log)
	var srv *http.Server
	heartbeat := s.metrics.Heartbeat.WithLabelValues(s.nodeName)
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
	ticker := time.NewTicker(s.poll)
	defer ticker.Stop()
	for {
		enabled, err := s.enabled(ctx)
		if err != nil {
			log.Error(err, "Reading the extender setting")
		}
		switch {
		case enabled && srv == nil:
			srv, err = s.serve(ctx)
			if err != nil {
				log.Error(err, "Starting the scheduler extender", "address", s.addr)
				break
			}
			heartbeat.Set(1)
			log.Info("Serving the scheduler extender", "address", s.addr)
			if err := s.publishEndpoint(ctx); err != nil {
				log.Error(err, "Pointing the extender's EndpointSlice at this manager")
			}
		case !enabled && srv != nil:
			stop()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

func (s *Server) enabled(ctx context.Context) (bool, error) {
	setting := &longhornv1.Setting{}
	err := s.client.Get(ctx, types.NamespacedName{Namespace: s.namespace, Name: longhornv1.SettingSchedulerExtenderEnabled}, setting)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return setting.Value == "true", nil
}

func (s *Server) serve(ctx context.Context) (*http.Server, error) {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", s.addr, err)
	}
	srv := &http.Server{
		Handler:           NewHandler(s.extender, s.metrics.FilterDuration),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			ctrl.LoggerFrom(ctx).Error(err, "Serving the scheduler extender")
		}
	}()
	return srv, nil
}

// publishEndpoint points the Service's EndpointSlice at this manager.
func (s *Server) publishEndpoint(ctx context.Context) error {
	if s.advertiseIP == "" {
		return nil
	}
	want := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: ServiceName, Namespace: s.namespace, Labels: map[string]string{
			discoveryv1.LabelServiceName: ServiceName,
			discoveryv1.LabelManagedBy:   "diskschedule.longhorn.io",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{s.advertiseIP},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			NodeName:   ptr.To(s.nodeName),
		}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(Port)), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	if net.ParseIP(s.advertiseIP).To4() == nil {
		want.AddressType = discoveryv1.AddressTypeIPv6
	}
	cur := &discoveryv1.EndpointSlice{}
	err := s.apiReader.Get(ctx, client.ObjectKeyFromObject(want), cur)
	if apierrors.IsNotFound(err) {
		return s.client.Create(ctx, want)
	}
	if err != nil {
		return err
	}
	cur.Labels, cur.AddressType, cur.Endpoints, cur.Ports = want.Labels, want.AddressType, want.Endpoints, want.Ports
	return s.client.Update(ctx, cur)
}
