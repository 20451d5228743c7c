package manager

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/longhorn/diskschedule/internal/gate"
)

// testCA is a CA that issues certificates for the tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a certificate for name, with the usage given, signed by ca.
func (ca testCA) issue(t *testing.T, name string, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestWebhookServerVerifiesClientCertificates starts the gate's webhook
// server as the manager configures it with a client CA (GateOptions.
// ClientCAFile, mounted outside the certificate directory as the chart
// mounts it) and posts an admission review to it: without a client
// certificate, or with one another CA signed, the call fails in the TLS
// handshake and no handler runs; with kube-apiserver's, it is served.
func TestWebhookServerVerifiesClientCertificates(t *testing.T) {
	serving := newTestCA(t, "gate-ca")
	apiserver := newTestCA(t, "kube-apiserver-webhook-client-ca")
	forger := newTestCA(t, "forger-ca")
	caFile := filepath.Join(t.TempDir(), "client-ca", "ca.crt")
	if err := os.MkdirAll(filepath.Dir(caFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(caFile, apiserver.pem, 0o600); err != nil {
		t.Fatal(err)
	}

	port := freePort(t)
	opts := Options{Namespace: "longhorn-system", Gate: &GateOptions{Host: "127.0.0.1", Port: port, ClientCAFile: caFile,
		TLS: gate.TLS{DNSName: "localhost", CertDir: t.TempDir()}}}
	mgrOpts, err := gateManagerOptions(t, opts)
	if err != nil {
		t.Fatal(err)
	}
	var served atomic.Int64
	mgrOpts.WebhookServer.Register(gate.ReplicaPath, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		served.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	addr := startWebhookServer(t, mgrOpts, serving.issue(t, "localhost", x509.ExtKeyUsageServerAuth), port)

	roots := x509.NewCertPool()
	roots.AddCert(serving.cert)
	// review posts a review presenting client, whichever CAs the server
	// names as acceptable.
	review := func(client *tls.Certificate) error {
		present := func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if client == nil {
				return &tls.Certificate{}, nil
			}
			return client, nil
		}
		transport := &http.Transport{DisableKeepAlives: true,
			TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "localhost", GetClientCertificate: present, MinVersion: tls.VersionTLS12}}
		defer transport.CloseIdleConnections()
		resp, err := (&http.Client{Transport: transport, Timeout: 5 * time.Second}).Post("https://"+addr+gate.ReplicaPath,
			"application/json", bytes.NewReader([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`)))
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}
	for _, c := range []struct {
		name   string
		client *tls.Certificate
	}{
		{"no client certificate", nil},
		{"a client certificate another CA signed", ptr.To(forger.issue(t, "kube-apiserver", x509.ExtKeyUsageClientAuth))},
	} {
		err := review(c.client)
		if err == nil || !strings.Contains(err.Error(), "tls") {
			t.Errorf("a review with %s: %v, want it refused in the TLS handshake", c.name, err)
		}
	}
	if n := served.Load(); n != 0 {
		t.Fatalf("%d reviews without kube-apiserver's client certificate reached the handler", n)
	}
	if err := review(ptr.To(apiserver.issue(t, "kube-apiserver", x509.ExtKeyUsageClientAuth))); err != nil {
		t.Fatalf("a review with kube-apiserver's client certificate: %v", err)
	}
	if n := served.Load(); n != 1 {
		t.Errorf("the review with kube-apiserver's client certificate reached the handler %d times, want once", n)
	}
}

// TestClientCAMustBeACertificate: a client CA file that is missing or holds
// no certificate stops the manager before anything is served.
func TestClientCAMustBeACertificate(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.crt")
	if err := os.WriteFile(garbage, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ file, want string }{
		{filepath.Join(dir, "missing.crt"), "reading the gate's client CA"},
		{garbage, "holds no PEM certificate"},
	} {
		opts := Options{Namespace: "longhorn-system", Gate: &GateOptions{ClientCAFile: c.file,
			TLS: gate.TLS{DNSName: "localhost", CertDir: t.TempDir()}}}
		if _, err := gateManagerOptions(t, opts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("client CA %s: %v, want an error saying %q", c.file, err, c.want)
		}
	}
}
