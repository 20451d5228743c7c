// Package extendertls issues the certificates the extender and its callers
// use where no rotator runs (the sandbox and the tests): a CA, the
// extender's serving pair for its Service's DNS name, and a client pair
// for kube-scheduler, made with cert-controller's generator, the one the
// manager's rotator issues them with in a cluster.
package extendertls

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
)

// ClientName is the common name of the client certificate Write issues.
const ClientName = "diskschedule-scheduler"

// validity is how long the certificates Write issues are valid.
const validity = 24 * time.Hour

// Files are the certificates of an extender and its callers in a directory.
type Files struct {
	// CertDir holds the extender's tls.crt and tls.key
	// (extender.ServerOptions.CertDir).
	CertDir string
	// CAFile is the CA that signed both pairs: the extender's client CA
	// and kube-scheduler's tlsConfig caFile.
	CAFile string
	// ClientCertFile and ClientKeyFile are kube-scheduler's client pair
	// (tlsConfig certFile and keyFile).
	ClientCertFile, ClientKeyFile string
	// ServerName is the name the serving certificate is issued for, which
	// a caller verifies (tlsConfig serverName when the URL names another
	// host).
	ServerName string
}

// Write issues a new CA, the extender's serving pair for serverName (the
// extender Service's DNS name, extender.ServiceDNSName) and a client pair,
// all signed by that CA, into dir, replacing what is there: writing again
// into the same directory is a rotation.
func Write(dir, serverName string) (*Files, error) {
	f := &Files{
		CertDir:        filepath.Join(dir, "serving"),
		CAFile:         filepath.Join(dir, "ca.crt"),
		ClientCertFile: filepath.Join(dir, "client", corev1.TLSCertKey),
		ClientKeyFile:  filepath.Join(dir, "client", corev1.TLSPrivateKeyKey),
		ServerName:     serverName,
	}
	begin := time.Now().Add(-time.Hour)
	end := begin.Add(validity)
	issuer := &rotator.CertRotator{CAName: "diskschedule-extender-test-ca", CAOrganization: "diskschedule", DNSName: f.ServerName,
		ExtKeyUsages: &[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	ca, err := issuer.CreateCACert(begin, end)
	if err != nil {
		return nil, fmt.Errorf("issuing the extender's test CA: %w", err)
	}
	crt, key, err := issuer.CreateCertPEM(ca, begin, end)
	if err != nil {
		return nil, fmt.Errorf("issuing the extender's serving certificate: %w", err)
	}
	client := &rotator.CertRotator{DNSName: ClientName, ExtKeyUsages: &[]x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	clientCrt, clientKey, err := client.CreateCertPEM(ca, begin, end)
	if err != nil {
		return nil, fmt.Errorf("issuing the extender's client certificate: %w", err)
	}
	for path, data := range map[string][]byte{
		filepath.Join(f.CertDir, corev1.TLSCertKey): crt, filepath.Join(f.CertDir, corev1.TLSPrivateKeyKey): key,
		f.ClientCertFile: clientCrt, f.ClientKeyFile: clientKey,
		f.CAFile: ca.CertPEM,
	} {
		if err := writeFile(path, data); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// ClientTLS is the TLS configuration of a caller with the client pair:
// it trusts the CA and verifies ServerName.
func (f *Files) ClientTLS() (*tls.Config, error) {
	pair, err := tls.LoadX509KeyPair(f.ClientCertFile, f.ClientKeyFile)
	if err != nil {
		return nil, fmt.Errorf("loading the extender's client certificate: %w", err)
	}
	ca, err := os.ReadFile(f.CAFile)
	if err != nil {
		return nil, fmt.Errorf("reading the extender's CA: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		return nil, errors.New("the extender's CA file holds no certificate")
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: roots, ServerName: f.ServerName,
		MinVersion: tls.VersionTLS12}, nil
}

// HTTPClient is an HTTP client that calls the extender with the client
// pair, each request bounded by timeout.
func (f *Files) HTTPClient(timeout time.Duration) (*http.Client, error) {
	cfg, err := f.ClientTLS()
	if err != nil {
		return nil, err
	}
	return &http.Client{Timeout: timeout, Transport: &http.Transport{TLSClientConfig: cfg}}, nil
}

// writeFile replaces path with data by a rename, as a mounted Secret is
// swapped in whole, so a reader never sees half a file.
func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
