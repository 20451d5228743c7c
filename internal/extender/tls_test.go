package extender

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/longhorn/diskschedule/test/framework/extendertls"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

// tlsExtender serves NewHandler (with /bind) behind serverTLS on a
// loopback port, with the certificates of files, until the test ends, and
// returns its address.
func tlsExtender(t *testing.T, files *extendertls.Files) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cfg, err := serverTLS(ctx, files.CertDir, files.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newHTTPServer(ctx, NewHandler(binder{}, HandlerOptions{Bind: true}))
	go func() { _ = srv.Serve(tls.NewListener(ln, cfg)) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// binder is stubDecider that binds every pod.
type binder struct{ stubDecider }

func (binder) Bind(context.Context, *extenderv1.ExtenderBindingArgs) error { return nil }

// call posts a filter (or a bind) to the extender at addr over a new
// connection with cfg, and returns the HTTP status.
func call(addr, path string, cfg *tls.Config) (int, error) {
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
	body := `{"pod":{"metadata":{"name":"p"}},"nodenames":["n1"]}`
	if path == "/bind" {
		body = `{"podName":"p","podNamespace":"ns","podUID":"u","node":"n1"}`
	}
	resp, err := hc.Post("https://"+addr+path, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	return resp.StatusCode, nil
}

func TestExtenderRequiresAClientCertificateOfItsCA(t *testing.T) {
	dir := t.TempDir()
	files, err := extendertls.Write(dir, ServiceDNSName("longhorn-system"))
	if err != nil {
		t.Fatal(err)
	}
	addr := tlsExtender(t, files)
	valid, err := files.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	other, err := extendertls.Write(filepath.Join(t.TempDir(), "other"), files.ServerName)
	if err != nil {
		t.Fatal(err)
	}
	otherCA, err := other.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	// A caller that trusts the extender but presents another CA's
	// certificate, or none.
	foreign := valid.Clone()
	foreign.Certificates = otherCA.Certificates
	anonymous := valid.Clone()
	anonymous.Certificates = nil

	for _, path := range []string{"/filter", "/bind"} {
		for name, cfg := range map[string]*tls.Config{"no client certificate": anonymous, "another CA's certificate": foreign} {
			if code, err := call(addr, path, cfg); err == nil {
				t.Errorf("%s with %s: HTTP %d, want the TLS handshake refused", path, name, code)
			} else if !strings.Contains(err.Error(), "tls") {
				t.Errorf("%s with %s: %v, want a TLS error", path, name, err)
			}
		}
		if code, err := call(addr, path, valid); err != nil || code != http.StatusOK {
			t.Errorf("%s with a valid client certificate: HTTP %d, %v; want 200", path, code, err)
		}
	}
	plain := &http.Client{Timeout: 5 * time.Second}
	if resp, err := plain.Post("http://"+addr+"/bind", "application/json", strings.NewReader("{}")); err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP /bind: HTTP %d, want no answer of the extender's", resp.StatusCode)
		}
	}
}

func TestExtenderPicksUpRotatedCertificates(t *testing.T) {
	dir := t.TempDir()
	files, err := extendertls.Write(dir, ServiceDNSName("longhorn-system"))
	if err != nil {
		t.Fatal(err)
	}
	addr := tlsExtender(t, files)
	before, err := files.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	if code, err := call(addr, "/filter", before); err != nil || code != http.StatusOK {
		t.Fatalf("before the rotation: HTTP %d, %v; want 200", code, err)
	}
	// A new CA, serving pair and client pair in the same files.
	if _, err := extendertls.Write(dir, files.ServerName); err != nil {
		t.Fatal(err)
	}
	after, err := files.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	// The client CA is read again at the next handshake: the old client
	// certificate is refused at once, whatever the serving pair.
	stale := after.Clone()
	stale.Certificates = before.Certificates
	stale.InsecureSkipVerify = true
	if code, err := call(addr, "/filter", stale); err == nil {
		t.Errorf("the client certificate of the rotated-out CA: HTTP %d, want the TLS handshake refused", code)
	}
	// The serving pair is reloaded by certwatcher (on the file event, or
	// its poll at the latest).
	testenv.Eventually(t, context.Background(), 30*time.Second, "the rotated serving certificate and client CA in use", func(context.Context) (bool, string, error) {
		code, err := call(addr, "/filter", after)
		if err != nil {
			return false, err.Error(), nil
		}
		return code == http.StatusOK, fmt.Sprintf("HTTP %d", code), nil
	}, testenv.Every(100*time.Millisecond))
}

func TestServerTLSNeedsBothFiles(t *testing.T) {
	files, err := extendertls.Write(t.TempDir(), "x")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ dir, ca string }{{"", files.CAFile}, {files.CertDir, ""}, {files.CertDir, files.CAFile + ".missing"}} {
		if _, err := serverTLS(context.Background(), c.dir, c.ca); err == nil {
			t.Errorf("serverTLS(%q, %q): no error, want one", c.dir, c.ca)
		}
	}
}
