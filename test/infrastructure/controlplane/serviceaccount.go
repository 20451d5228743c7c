package controlplane

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// ServiceAccountKeyFile is the name of the file WriteServiceAccountKey writes.
const ServiceAccountKeyFile = "service-account.key"

// WriteServiceAccountKey writes a new ECDSA P-256 private key, PEM-encoded,
// to ServiceAccountKeyFile in dir and returns the file's path: the key
// kube-apiserver signs and verifies service-account tokens with and
// kube-controller-manager's token controller signs them with.
func WriteServiceAccountKey(dir string) (string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", fmt.Errorf("generating the service-account key: %w", err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", fmt.Errorf("encoding the service-account key: %w", err)
	}
	path := filepath.Join(dir, ServiceAccountKeyFile)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return "", fmt.Errorf("writing the service-account key: %w", err)
	}
	return path, nil
}

// ShareServiceAccountKey makes api, before it starts, sign service-account
// tokens with the private key at keyPath and accept the tokens it signs,
// so that kube-controller-manager, given the same key, issues tokens
// kube-apiserver accepts.
func ShareServiceAccountKey(api *envtest.APIServer, keyPath string) {
	api.Configure().
		Set("service-account-key-file", keyPath).
		Set("service-account-signing-key-file", keyPath)
}
