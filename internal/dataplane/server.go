package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"

	imtypes "github.com/longhorn/longhorn-instance-manager/pkg/types"
	"github.com/longhorn/types/pkg/generated/imrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// InstanceManager is one node's simulated instance manager: the instances
// it runs and the gRPC services longhorn-manager reaches them through.
type InstanceManager struct {
	ip string

	mu        sync.Mutex
	instances map[string]*instance
	nextPort  int32
	watchers  map[chan struct{}]struct{}
}

// NewInstanceManager returns an instance manager that will serve on ip, its
// pod's IP.
func NewInstanceManager(ip string) *InstanceManager {
	return &InstanceManager{
		ip:        ip,
		instances: map[string]*instance{},
		nextPort:  firstPort,
		watchers:  map[chan struct{}]struct{}{},
	}
}

// IP is the address the instance manager serves on.
func (im *InstanceManager) IP() string { return im.ip }

// Listen binds the instance manager's ports on its IP: the process manager
// (8500), the engine proxy (8501), the disk service (8502) and the instance
// service (8503), as longhorn-instance-manager does. Serve serves them.
func (im *InstanceManager) Listen() (*Listeners, error) {
	ls := &Listeners{im: im}
	ports := []int{
		imtypes.InstanceManagerProcessManagerServiceDefaultPort,
		imtypes.InstanceManagerProxyServiceDefaultPort,
		imtypes.InstanceManagerDiskServiceDefaultPort,
		imtypes.InstanceManagerInstanceServiceDefaultPort,
	}
	for _, port := range ports {
		l, err := net.Listen("tcp", net.JoinHostPort(im.ip, fmt.Sprint(port)))
		if err != nil {
			ls.close()
			return nil, fmt.Errorf("instance manager on %s: %w", im.ip, err)
		}
		ls.listeners = append(ls.listeners, l)
	}
	return ls, nil
}

// Listeners are an instance manager's bound ports.
type Listeners struct {
	im        *InstanceManager
	listeners []net.Listener
}

func (ls *Listeners) close() {
	for _, l := range ls.listeners {
		_ = l.Close()
	}
}

// Serve serves the instance manager's services until ctx ends, then stops
// them and ends every watch.
func (ls *Listeners) Serve(ctx context.Context) error {
	im := ls.im
	register := []func(*grpc.Server){
		func(s *grpc.Server) { imrpc.RegisterProcessManagerServiceServer(s, processManager{}) },
		func(s *grpc.Server) { imrpc.RegisterProxyEngineServiceServer(s, &proxy{im: im}) },
		func(s *grpc.Server) { imrpc.RegisterDiskServiceServer(s, diskService{}) },
		func(s *grpc.Server) { imrpc.RegisterInstanceServiceServer(s, &instanceService{im: im}) },
	}
	servers := make([]*grpc.Server, len(ls.listeners))
	errs := make(chan error, len(ls.listeners))
	for i, l := range ls.listeners {
		s := grpc.NewServer()
		healthpb.RegisterHealthServer(s, health.NewServer())
		register[i](s)
		servers[i] = s
		go func() { errs <- s.Serve(l) }()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errs:
	}
	im.stopWatches()
	for _, s := range servers {
		s.Stop()
	}
	if errors.Is(err, grpc.ErrServerStopped) {
		err = nil
	}
	return err
}

// watch returns a channel that receives on every change of the instances
// (coalesced), and a function that ends the watch.
func (im *InstanceManager) watch() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	im.mu.Lock()
	im.watchers[ch] = struct{}{}
	im.mu.Unlock()
	return ch, func() {
		im.mu.Lock()
		defer im.mu.Unlock()
		if _, ok := im.watchers[ch]; ok {
			delete(im.watchers, ch)
			close(ch)
		}
	}
}

// notifyLocked tells every watcher the instances changed; im.mu is held.
func (im *InstanceManager) notifyLocked() {
	for ch := range im.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// stopWatches ends every watch.
func (im *InstanceManager) stopWatches() {
	im.mu.Lock()
	defer im.mu.Unlock()
	for ch := range im.watchers {
		delete(im.watchers, ch)
		close(ch)
	}
}
