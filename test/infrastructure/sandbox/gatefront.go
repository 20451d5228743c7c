package sandbox

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/longhorn/diskschedule/internal/gate"
)

// gateFront stands in for the gate's Service: kube-apiserver calls it, and
// it forwards each connection to one of the managers' webhook servers in
// turn, skipping those that do not accept, as a Service's endpoints would.
// TLS passes through: each manager serves the certificate its rotator keeps.
type gateFront struct {
	ln       net.Listener
	mu       sync.Mutex
	backends []string
	next     int
	wg       sync.WaitGroup
}

// newGateFront listens on a free local port.
func newGateFront() (*gateFront, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for the gate's front: %w", err)
	}
	f := &gateFront{ln: ln}
	f.wg.Add(1)
	go f.serve()
	return f, nil
}

// url is the gate's base URL for kube-apiserver; the certificate names
// localhost.
func (f *gateFront) url() string {
	return fmt.Sprintf("https://localhost:%d", f.ln.Addr().(*net.TCPAddr).Port)
}

// add makes a manager's webhook server an endpoint.
func (f *gateFront) add(backend string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.backends = append(f.backends, backend)
}

func (f *gateFront) serve() {
	defer f.wg.Done()
	for {
		conn, err := f.ln.Accept()
		if err != nil {
			return
		}
		go f.forward(conn)
	}
}

// forward pipes conn to the first endpoint that accepts, starting with the
// next in turn.
func (f *gateFront) forward(conn net.Conn) {
	defer conn.Close()
	f.mu.Lock()
	backends := append([]string(nil), f.backends...)
	start := f.next
	f.next++
	f.mu.Unlock()
	for i := range backends {
		up, err := net.DialTimeout("tcp", backends[(start+i)%len(backends)], 2*time.Second)
		if err != nil {
			continue
		}
		defer up.Close()
		done := make(chan struct{}, 2)
		go func() { _, _ = io.Copy(up, conn); done <- struct{}{} }()
		go func() { _, _ = io.Copy(conn, up); done <- struct{}{} }()
		<-done
		return
	}
}

// close stops accepting connections.
func (f *gateFront) close() error {
	err := f.ln.Close()
	f.wg.Wait()
	return err
}

// registerGate creates the gate's webhook configuration, as config/webhook
// ships it, pointed at the front.
func (s *Sandbox) registerGate(ctx context.Context) error {
	front, err := newGateFront()
	if err != nil {
		return err
	}
	s.gateFront = front
	vwc, err := gate.LocalConfiguration(front.url(), Namespace)
	if err != nil {
		return err
	}
	if err := s.admin.Create(ctx, vwc); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating ValidatingWebhookConfiguration %s: %w", vwc.Name, err)
	}
	s.progress("registered the admission gate %s at %s", vwc.Name, front.url())
	return nil
}

// waitGate waits until the managers' rotator injected the CA into the
// gate's webhook configuration and the gate answers TLS with a certificate
// that CA signed for localhost, as kube-apiserver checks it.
func (s *Sandbox) waitGate(ctx context.Context) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, s.opts.ReadyTimeout, true, func(ctx context.Context) (bool, error) {
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := s.admin.Get(ctx, client.ObjectKey{Name: gate.ConfigurationName}, vwc); err != nil {
			return false, err
		}
		if len(vwc.Webhooks) == 0 || len(vwc.Webhooks[0].ClientConfig.CABundle) == 0 {
			last = errors.New("no caBundle injected yet")
			return false, nil
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(vwc.Webhooks[0].ClientConfig.CABundle)
		addr := s.gateFront.ln.Addr().String()
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{RootCAs: pool, ServerName: "localhost"})
		if err != nil {
			last = err
			return false, nil
		}
		return true, conn.Close()
	})
	if err != nil {
		return fmt.Errorf("waiting for the admission gate to serve (%v): %w", last, err)
	}
	return nil
}
