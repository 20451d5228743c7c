package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
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
	// net is the network its engines reach their replicas through.
	net *Network

	mu        sync.Mutex
	instances map[string]*instance
	nextPort  int32
	watchers  map[chan struct{}]struct{}
}

// NewInstanceManager returns an instance manager that will serve on ip, its
// pod's IP, on a network of its own (Network.InstanceManager puts several
// on one).
func NewInstanceManager(ip string) *InstanceManager {
	return NewNetwork().InstanceManager(ip)
}

// Network is what the instance managers of one sandbox share: which of them
// still serve. An engine reaches its replicas through it, so a replica
// whose instance manager stopped (its node went down) is found in error by
// the engines that have it and cannot be added to one, as longhorn-engine
// finds a replica whose connection failed. It knows nothing of time: an
// engine finds the replica in error the next time it is asked, as
// longhorn-engine does at its next I/O or ping.
type Network struct {
	mu      sync.RWMutex
	stopped map[string]bool
	// held is the bytes held on each disk, by its path.
	held map[string]int64
}

// DiskHeld is the bytes held on the disk at path (its Disk.Path): what the
// replicas and backing-image copies on it hold, which its filesystem
// reports to statfs as used.
func (n *Network) DiskHeld(path string) int64 {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.held[path]
}

// NewNetwork returns a network on which every instance manager serves.
func NewNetwork() *Network {
	return &Network{stopped: map[string]bool{}}
}

// InstanceManager returns an instance manager that will serve on ip, its
// pod's IP, on n.
func (n *Network) InstanceManager(ip string) *InstanceManager {
	return &InstanceManager{
		ip:        ip,
		net:       n,
		instances: map[string]*instance{},
		nextPort:  firstPort,
		watchers:  map[chan struct{}]struct{}{},
	}
}

// stop marks the instance manager on ip stopped.
func (n *Network) stop(ip string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.stopped[ip] = true
}

// reachable reports whether a replica's address (tcp://ip:port, or
// ip:port) is served: its instance manager has not stopped.
func (n *Network) reachable(addr string) bool {
	host := strings.TrimPrefix(addr, "tcp://")
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	return !n.stopped[host]
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
	ls.stop = make(chan struct{})
	ls.done = make(chan struct{})
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

	stopOnce sync.Once
	// stop is closed by Stop; done when Serve returned.
	stop, done chan struct{}
	mu         sync.Mutex
	serving    bool
}

func (ls *Listeners) close() {
	for _, l := range ls.listeners {
		_ = l.Close()
	}
}

// Serve serves the instance manager's services until ctx ends or Stop is
// called, then stops them and ends every watch. After Stop it returns nil.
func (ls *Listeners) Serve(ctx context.Context) error {
	ls.mu.Lock()
	select {
	case <-ls.stop:
		ls.mu.Unlock()
		return nil
	default:
	}
	ls.serving = true
	ls.mu.Unlock()
	defer close(ls.done)
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
	case <-ls.stop:
	case err = <-errs:
	}
	im.stopWatches()
	for _, s := range servers {
		s.Stop()
	}
	select {
	case <-ls.stop:
		err = nil
	default:
	}
	if errors.Is(err, grpc.ErrServerStopped) {
		err = nil
	}
	return err
}

// Stop stops the instance manager as its node going down does: from then
// on the engines of every instance manager on its network find the
// replicas it ran in error and cannot add them, and its ports refuse
// connections (its watches end, and Serve returns nil). What it ran is not
// deleted and nothing is written: longhorn-manager finds out as it does
// when a node dies. It returns once the ports are closed; a second Stop
// does nothing. A stopped instance manager does not serve again.
func (ls *Listeners) Stop() {
	ls.stopOnce.Do(func() {
		ls.im.net.stop(ls.im.ip)
		close(ls.stop)
	})
	ls.mu.Lock()
	serving := ls.serving
	ls.mu.Unlock()
	if serving {
		<-ls.done
		return
	}
	ls.close()
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
