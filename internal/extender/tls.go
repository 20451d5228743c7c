package extender

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
)

// ServiceDNSName is the name kube-scheduler calls the extender by in
// namespace: its Service's, for which its serving certificate is issued.
func ServiceDNSName(namespace string) string { return ServiceName + "." + namespace + ".svc" }

// serverTLS returns the extender's TLS configuration: the serving pair in
// certDir (tls.crt, tls.key), kept current by controller-runtime's
// certwatcher, and a client certificate required of every caller and
// verified against the CA bundle in clientCAFile, read again when the file
// changes. A caller without such a certificate is refused in the
// handshake, before any request is read. The watcher runs until ctx ends.
func serverTLS(ctx context.Context, certDir, clientCAFile string) (*tls.Config, error) {
	if certDir == "" || clientCAFile == "" {
		return nil, errors.New("the extender serves HTTPS only: it needs a directory with its certificate " +
			"(--extender-cert-dir) and the CA of its callers' client certificates (--extender-client-ca-file)")
	}
	watcher, err := certwatcher.New(filepath.Join(certDir, corev1.TLSCertKey), filepath.Join(certDir, corev1.TLSPrivateKeyKey))
	if err != nil {
		return nil, fmt.Errorf("loading the extender's certificate from %s: %w", certDir, err)
	}
	cas := &clientCAs{path: clientCAFile}
	if _, err := cas.pool(); err != nil {
		return nil, err
	}
	go func() {
		if err := watcher.Start(ctx); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Watching the extender's certificate", "dir", certDir)
		}
	}()
	base := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		ClientAuth:     tls.RequireAndVerifyClientCert,
		GetCertificate: watcher.GetCertificate,
	}
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		pool, err := cas.pool()
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Reading the extender's client CA", "file", clientCAFile)
			return nil, err
		}
		cfg := base.Clone()
		cfg.GetConfigForClient = nil
		cfg.ClientCAs = pool
		return cfg, nil
	}
	return base, nil
}

// clientCAs is the CA bundle in a file, parsed again whenever its content
// changes (a mounted Secret is swapped in whole), so a rotated CA is
// trusted from the next handshake on.
type clientCAs struct {
	path string

	mu      sync.Mutex
	content []byte
	parsed  *x509.CertPool
}

// pool returns the bundle as it is in the file now; a file that cannot be
// read or holds no certificate is an error, and no caller is admitted.
func (c *clientCAs) pool() (*x509.CertPool, error) {
	data, err := os.ReadFile(c.path)
	if err != nil {
		return nil, fmt.Errorf("reading the extender's client CA: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.parsed != nil && bytes.Equal(data, c.content) {
		return c.parsed, nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("the extender's client CA %s holds no PEM certificate", c.path)
	}
	c.content, c.parsed = data, pool
	return pool, nil
}
