package manager

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	certutil "k8s.io/client-go/util/cert"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/longhorn/diskschedule/internal/gate"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

// TestWebhookServerOffersNoHTTP2 starts the gate's webhook server as the
// manager configures it (its certificate replaced by a self-signed one,
// as the gate's comes from a Secret) and asks it for h2: it answers
// HTTP/1.1 unless EnableHTTP2; the metrics server's TLS options say the same.
func TestWebhookServerOffersNoHTTP2(t *testing.T) {
	pemCert, pemKey, err := certutil.GenerateSelfSignedCertKey("localhost", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(pemCert, pemKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, enable := range []bool{false, true} {
		t.Run(fmt.Sprintf("EnableHTTP2=%t", enable), func(t *testing.T) {
			want := map[bool]string{false: "http/1.1", true: "h2"}[enable]
			port := freePort(t)
			opts := Options{Namespace: "longhorn-system", MetricsSecure: true, EnableHTTP2: enable,
				Gate: &GateOptions{Host: "127.0.0.1", Port: port, TLS: gate.TLS{DNSName: "localhost", CertDir: t.TempDir()}}}
			mgrOpts, err := gateManagerOptions(t, opts)
			if err != nil {
				t.Fatal(err)
			}

			metricsTLS := &tls.Config{NextProtos: []string{"h2", "http/1.1"}}
			for _, op := range mgrOpts.Metrics.TLSOpts {
				op(metricsTLS)
			}
			if got := metricsTLS.NextProtos[0]; got != want {
				t.Errorf("the metrics server offers %v first, want %s", metricsTLS.NextProtos, want)
			}

			addr := startWebhookServer(t, mgrOpts, pair, port)
			conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr,
				&tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}}) //nolint:gosec // a self-signed test certificate
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = conn.Close() }()
			if got := conn.ConnectionState().NegotiatedProtocol; got != want {
				t.Errorf("a client offering h2 got %q, want %q", got, want)
			}
		})
	}
}

// gateManagerOptions returns controller-runtime's options for opts, whose
// Gate is set, as the manager computes them.
func gateManagerOptions(t *testing.T, opts Options) (ctrl.Options, error) {
	t.Helper()
	cert, err := gate.NewCertificate(opts.Namespace, opts.Gate.TLS)
	if err != nil {
		t.Fatal(err)
	}
	return managerOptions(nil, withDefaults(opts), cert)
}

// startWebhookServer starts the webhook server of mgrOpts, listening on
// port, serving pair instead of the gate's certificate (which comes from a
// Secret), and returns its address once it accepts connections.
func startWebhookServer(t *testing.T, mgrOpts ctrl.Options, pair tls.Certificate, port int) string {
	t.Helper()
	bounded, ok := mgrOpts.WebhookServer.(boundedWebhookServer)
	if !ok {
		t.Fatalf("the webhook server is a %T, want its handlers bounded", mgrOpts.WebhookServer)
	}
	srv := bounded.Server.(*webhook.DefaultServer)
	srv.Options.TLSOpts = append(srv.Options.TLSOpts, func(c *tls.Config) {
		c.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &pair, nil }
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("webhook server: %v", err)
		}
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	testenv.Eventually(t, context.Background(), 10*time.Second, "the webhook server listens", func(context.Context) (bool, string, error) {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false, err.Error(), nil
		}
		return true, "", conn.Close()
	})
	return addr
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestSlowBodiesAreCutOff: a request whose body comes a byte at a time,
// slowly, to a gate handler or to the metrics server, is cut off once the
// read timeout has passed.
func TestSlowBodiesAreCutOff(t *testing.T) {
	metrics, err := boundedMetrics(nil)(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		wrap    func(http.Handler) http.Handler
	}{
		{"webhook", webhookReadTimeout, func(h http.Handler) http.Handler {
			inner := webhook.NewServer(webhook.Options{})
			boundedWebhookServer{inner}.Register("/validate", h)
			return inner.WebhookMux()
		}},
		{"metrics", metricsReadTimeout, func(h http.Handler) http.Handler {
			bounded, err := metrics(logr.Discard(), h)
			if err != nil {
				t.Fatal(err)
			}
			return bounded
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			readErr := make(chan error, 1)
			srv := httptest.NewServer(tc.wrap(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				_, err := io.ReadAll(r.Body)
				readErr <- err
			})))
			defer srv.Close()
			conn, err := net.DialTimeout("tcp", srv.Listener.Addr().String(), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = conn.Close() }()
			start := time.Now()
			if _, err := fmt.Fprintf(conn, "POST /validate HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			tick := time.NewTicker(200 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case err := <-readErr:
					took := time.Since(start)
					if err == nil || took < tc.timeout || took > tc.timeout+5*time.Second {
						t.Errorf("the body read ended after %s with %v, want an error after %s", took.Round(time.Millisecond), err, tc.timeout)
					}
					return
				case <-tick.C:
					if time.Since(start) > tc.timeout+5*time.Second {
						t.Fatalf("a body sent a byte every 200ms was still read after %s", time.Since(start).Round(time.Millisecond))
					}
					if _, err := conn.Write([]byte("x")); err != nil && !errors.Is(err, net.ErrClosed) {
						t.Logf("writing the body: %v", err)
					}
				}
			}
		})
	}
}
