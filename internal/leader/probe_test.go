package leader

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/longhorn/diskschedule/test/framework/testenv"
)

func TestIdentityCarriesTheAddress(t *testing.T) {
	id := Identity("manager-7d9f_4b1e", "10.42.0.17:9443")
	if got, ok := AddressOf(id); !ok || got != "10.42.0.17:9443" {
		t.Errorf("AddressOf(%q) = %q, %v", id, got, ok)
	}
	ipv6 := Identity("manager-7d9f_4b1e", "[fd00::17]:9443")
	if got, ok := AddressOf(ipv6); !ok || got != "[fd00::17]:9443" {
		t.Errorf("AddressOf(%q) = %q, %v", ipv6, got, ok)
	}
	for _, id := range []string{Identity("manager-7d9f_4b1e", ""), "manager@"} {
		if got, ok := AddressOf(id); ok {
			t.Errorf("AddressOf(%q) = %q, want none", id, got)
		}
	}
}

// served starts the probe handler of a replica whose identity names the
// test server's own address, over TLS, and returns that identity, the
// replica's Lease and the probe's client configuration.
func served(t *testing.T, clk *clocktesting.FakeClock) (string, *Lease, func() *tls.Config) {
	t.Helper()
	l := NewLease(name, time.Second, clk, logr.Discard())
	var self string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		Handler(self, l).ServeHTTP(w, r)
	}))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	self = Identity("manager-0_1111", srv.Listener.Addr().String())
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	return self, l, func() *tls.Config { return &tls.Config{RootCAs: pool, ServerName: "example.com"} }
}

// TestProbe asks a replica's gate, over TLS, whether it holds the Lease:
// alive while it does, gone once it says it does not (another holder, or
// its own renewals late) or nothing listens at its address, and unknown
// when nothing can be told (no address, no CA).
func TestProbe(t *testing.T) {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	self, l, cfg := served(t, clk)
	p := &Prober{TLS: cfg}
	ctx := context.Background()

	l.observe(lease(self, start, 15))
	if v, err := p.Probe(ctx, self); v != Alive {
		t.Errorf("the holder that renews: %s (%v), want alive", v, err)
	}
	if v, err := p.Probe(ctx, Identity("manager-0_2222", strings.TrimPrefix(self, "manager-0_1111@"))); v != Gone || !strings.Contains(err.Error(), "not manager-0_2222") {
		t.Errorf("another replica at the address: %s (%v), want gone", v, err)
	}
	clk.Step(1500 * time.Millisecond)
	if v, err := p.Probe(ctx, self); v != Gone || !strings.Contains(err.Error(), "renewals are late") {
		t.Errorf("a holder whose renewals are late on its own view: %s (%v), want gone", v, err)
	}

	// Nothing listens at a closed port.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := Identity("manager-1_3333", ln.Addr().String())
	ln.Close()
	if v, err := p.Probe(ctx, closed); v != Gone {
		t.Errorf("nothing at the address: %s (%v), want gone", v, err)
	}

	if v, _ := p.Probe(ctx, "manager-1_3333"); v != Unknown {
		t.Errorf("an identity with no address: %s, want unknown", v)
	}
	if v, _ := (&Prober{TLS: func() *tls.Config { return nil }}).Probe(ctx, self); v != Unknown {
		t.Errorf("no CA yet: %s, want unknown", v)
	}
	// A server whose certificate the CA did not sign says nothing.
	if v, _ := (&Prober{TLS: func() *tls.Config { return &tls.Config{ServerName: "example.com", RootCAs: x509.NewCertPool()} }}).Probe(ctx, self); v != Unknown {
		t.Errorf("an unknown certificate: %s, want unknown", v)
	}
}

// TestSuspect: a follower's Lease asks its holder once a write has waited
// and stops counting it as deciding as soon as the holder's address
// refuses the probe, telling the waiters; a renewal seen after that counts
// again; its own holding is never probed.
func TestSuspect(t *testing.T) {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	verdicts := make(chan Verdict, 1)
	asked := make(chan string, 4)
	l := NewLease(name, time.Second, clk, logr.Discard()).WithProbe("me@127.0.0.1:1", func(_ context.Context, holder string) (Verdict, error) {
		asked <- holder
		return <-verdicts, nil
	})
	l.observe(lease("other@127.0.0.1:2", start, 15))
	deciding, _, news := l.Deciding()
	if !deciding {
		t.Fatal("the holder does not count as deciding after its renewal")
	}
	l.Suspect()
	l.Suspect() // one probe at a time
	if got := <-asked; got != "other@127.0.0.1:2" {
		t.Fatalf("probed %q", got)
	}
	verdicts <- Gone
	select {
	case <-news:
	case <-time.After(5 * time.Second):
		t.Fatal("the waiters were not told of the verdict")
	}
	if deciding, _, _ := l.Deciding(); deciding {
		t.Error("a holder found gone still counts as deciding")
	}
	if why := l.Why(); !strings.Contains(why, "holder other@127.0.0.1:2 is gone") {
		t.Errorf("Why = %q", why)
	}
	select {
	case h := <-asked:
		t.Errorf("probed %q twice at once", h)
	default:
	}

	// A renewal seen after the probe: the holder was alive after all.
	clk.Step(100 * time.Millisecond)
	l.observe(lease("other@127.0.0.1:2", start.Add(time.Second), 15))
	if deciding, _, _ := l.Deciding(); !deciding {
		t.Error("a renewal after the probe does not count")
	}

	// Within minProbeInterval of the last probe nothing is asked; after it,
	// an alive verdict changes nothing.
	l.Suspect()
	select {
	case h := <-asked:
		t.Errorf("probed %q within minProbeInterval", h)
	default:
	}
	clk.Step(minProbeInterval)
	l.Suspect()
	<-asked
	verdicts <- Alive
	testenv.Eventually(t, context.Background(), 5*time.Second, "the probe ends", func(context.Context) (bool, string, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		return !l.probing, "probing", nil
	}, testenv.Every(time.Millisecond))
	if deciding, _, _ := l.Deciding(); !deciding {
		t.Error("an alive holder does not count as deciding")
	}

	// This replica holds the Lease: nothing to ask.
	clk.Step(minProbeInterval)
	l.observe(lease("me@127.0.0.1:1", start.Add(2*time.Second), 15))
	l.Suspect()
	select {
	case h := <-asked:
		t.Errorf("probed itself (%q)", h)
	default:
	}
}
