package leader

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// ProbePath is where every replica's gate answers whether it is the
// leader named in the query (Handler).
const ProbePath = "/leader"

// addressSeparator separates a holder's identity from the address its gate
// serves on (Identity).
const addressSeparator = "@"

// Identity returns the leader-election identity of a replica: its own
// unique name (controller-runtime's "<hostname>_<uuid>") and, after an
// "@", the address its gate serves on, so that the other replicas can ask
// the holder of the Lease directly whether it still decides (Prober).
// Without an address the identity is the name alone, and the holder can
// only be judged by its renewals.
func Identity(name, address string) string {
	if address == "" {
		return name
	}
	return name + addressSeparator + address
}

// AddressOf returns the gate address an identity names, if any.
func AddressOf(identity string) (string, bool) {
	i := strings.LastIndex(identity, addressSeparator)
	if i < 0 || i == len(identity)-1 {
		return "", false
	}
	return identity[i+1:], true
}

// Verdict is what a probe of the Lease's holder found.
type Verdict int

const (
	// Unknown: the probe could not tell (no address, a timeout, a TLS or
	// HTTP error): the holder is judged by its renewals and decisions alone.
	Unknown Verdict = iota
	// Alive: the holder answered that it holds the Lease.
	Alive
	// Gone: nothing listens at the holder's address any more (the
	// connection was refused), or what answers there is not the holder.
	Gone
)

// String names the verdict for logs.
func (v Verdict) String() string {
	switch v {
	case Alive:
		return "alive"
	case Gone:
		return "gone"
	default:
		return "unknown"
	}
}

// DefaultProbeTimeout bounds one probe of the holder.
const DefaultProbeTimeout = 500 * time.Millisecond

// Prober asks a Lease holder's gate whether it still holds the Lease, over
// the gate's own TLS: the gate's CA, and the name kube-apiserver calls it
// by, since every replica serves the same certificate.
type Prober struct {
	// TLS returns the client configuration for one probe (the gate's CA
	// as currently kept, and the server name to verify); nil makes the
	// probe Unknown.
	TLS func() *tls.Config
	// Timeout bounds a probe; DefaultProbeTimeout when not positive.
	Timeout time.Duration
}

// Probe asks the holder named identity. Only a refused connection or an
// answer that the replica there is not that holder is Gone: a timeout says
// nothing (a loaded node, a network policy), so it is Unknown.
func (p *Prober) Probe(ctx context.Context, identity string) (Verdict, error) {
	address, ok := AddressOf(identity)
	if !ok {
		return Unknown, fmt.Errorf("the identity %q names no address", identity)
	}
	var cfg *tls.Config
	if p.TLS != nil {
		cfg = p.TLS()
	}
	if cfg == nil {
		return Unknown, errors.New("the gate's CA is not loaded yet")
	}
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = DefaultProbeTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	u := url.URL{Scheme: "https", Host: address, Path: ProbePath, RawQuery: url.Values{"identity": {identity}}.Encode()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Unknown, fmt.Errorf("probing %s: %w", address, err)
	}
	transport := &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true,
		DialContext: (&net.Dialer{Timeout: timeout}).DialContext}
	defer transport.CloseIdleConnections()
	resp, err := (&http.Client{Transport: transport}).Do(req)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return Gone, fmt.Errorf("probing %s: %w", address, err)
		}
		return Unknown, fmt.Errorf("probing %s: %w", address, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	switch resp.StatusCode {
	case http.StatusOK:
		return Alive, nil
	case http.StatusConflict:
		return Gone, fmt.Errorf("probing %s: %s", address, strings.TrimSpace(string(body)))
	default:
		return Unknown, fmt.Errorf("probing %s: HTTP %d: %s", address, resp.StatusCode, strings.TrimSpace(string(body)))
	}
}

// Handler answers probes on a replica whose identity is self: 200 when the
// probe names self and l counts self as deciding (it holds the Lease and
// its renewals are seen on time), 409 otherwise, saying why; 400 when the
// query names nobody.
func Handler(self string, l *Lease) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked := r.URL.Query().Get("identity")
		if asked == "" {
			http.Error(w, "the query names no identity", http.StatusBadRequest)
			return
		}
		if asked != self {
			http.Error(w, fmt.Sprintf("this replica is %s, not %s", self, asked), http.StatusConflict)
			return
		}
		if !l.heldBy(self) {
			http.Error(w, fmt.Sprintf("%s does not hold the Lease %s, or its renewals are late", self, l.name), http.StatusConflict)
			return
		}
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "deciding\n")
	})
}
