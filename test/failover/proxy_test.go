package failover_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/longhorn/diskschedule/internal/extender"
	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
)

// leaderProxy is the extender Service as kube-proxy would implement it:
// every connection kube-scheduler opens is forwarded to the endpoint the
// Service's EndpointSlice names when the connection is made. A connection
// made while the slice names a manager that is gone fails, as it would in
// a cluster; a connection to a manager that stops is closed with it.
type leaderProxy struct {
	ln      net.Listener
	resolve func(context.Context) (string, error)
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]bool
	// forwarded counts the connections forwarded to each backend address.
	forwarded map[string]int
	// failed counts connections that found no backend.
	failed int
}

// newLeaderProxy listens on a free loopback port; Serve starts forwarding.
// Connections made before Serve wait in the listen queue.
func newLeaderProxy() (*leaderProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for kube-scheduler: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &leaderProxy{ln: ln, ctx: ctx, cancel: cancel, conns: map[net.Conn]bool{}, forwarded: map[string]int{}}, nil
}

// URL is the extender URL kube-scheduler is configured with: the proxy
// forwards TCP, so TLS is between kube-scheduler and the extender.
func (p *leaderProxy) URL() string { return "https://" + p.ln.Addr().String() }

// Serve forwards connections to the address resolve returns, until Close.
func (p *leaderProxy) Serve(resolve func(context.Context) (string, error)) {
	p.resolve = resolve
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := p.ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go p.forward(c)
		}
	}()
}

func (p *leaderProxy) forward(c net.Conn) {
	defer p.wg.Done()
	if !p.track(c) {
		return
	}
	defer p.untrack(c)
	addr, err := p.resolve(p.ctx)
	var backend net.Conn
	if err == nil {
		backend, err = (&net.Dialer{Timeout: time.Second}).DialContext(p.ctx, "tcp", addr)
	}
	p.mu.Lock()
	if err != nil {
		p.failed++
	} else {
		p.forwarded[addr]++
	}
	p.mu.Unlock()
	if err != nil {
		return // kube-scheduler sees the connection closed: no ready endpoint
	}
	if !p.track(backend) {
		return
	}
	defer p.untrack(backend)
	done := make(chan struct{}, 2)
	for _, pipe := range [][2]net.Conn{{backend, c}, {c, backend}} {
		go func() {
			_, _ = io.Copy(pipe[0], pipe[1])
			done <- struct{}{}
		}()
	}
	// HTTP needs no half-closed connections: when either side is done, so is the other.
	<-done
	_ = c.Close()
	_ = backend.Close()
	<-done
}

// track records an open connection, or closes it when the proxy is closed.
func (p *leaderProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx.Err() != nil {
		_ = c.Close()
		return false
	}
	p.conns[c] = true
	return true
}

func (p *leaderProxy) untrack(c net.Conn) {
	_ = c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// Forwarded returns how many connections went to backend addr, and how
// many found no backend at all.
func (p *leaderProxy) Forwarded(addr string) (forwarded, failed int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.forwarded[addr], p.failed
}

// Close stops accepting, closes every connection and waits for the
// forwarding goroutines.
func (p *leaderProxy) Close() {
	p.mu.Lock()
	p.cancel()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	_ = p.ln.Close()
	p.wg.Wait()
}

// endpointResolver reads the extender Service's EndpointSlice from the API
// server and returns where its first ready endpoint listens: network maps
// each endpoint ("podIP:9504") to the loopback address its manager listens
// on, as the pod network would route it.
func endpointResolver(c client.Reader, network map[string]string) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		slice := &discoveryv1.EndpointSlice{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: sandbox.Namespace, Name: extender.ServiceName}, slice); err != nil {
			return "", err
		}
		endpoint, err := sliceAddress(slice)
		if err != nil {
			return "", err
		}
		addr, ok := network[endpoint]
		if !ok {
			return "", fmt.Errorf("no manager listens at %s", endpoint)
		}
		return addr, nil
	}
}

// sliceAddress returns "address:port" of the slice's first ready endpoint.
func sliceAddress(slice *discoveryv1.EndpointSlice) (string, error) {
	if len(slice.Ports) == 0 || slice.Ports[0].Port == nil {
		return "", errors.New("the EndpointSlice has no port")
	}
	for _, ep := range slice.Endpoints {
		if ep.Conditions.Ready != nil && !*ep.Conditions.Ready || len(ep.Addresses) == 0 {
			continue
		}
		return net.JoinHostPort(ep.Addresses[0], strconv.Itoa(int(*slice.Ports[0].Port))), nil
	}
	return "", errors.New("the EndpointSlice has no ready endpoint")
}
