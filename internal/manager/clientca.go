package manager

import (
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
)

// clientCAName returns the name controller-runtime's webhook server reads
// the client CA file by (webhook.Options.ClientCAName, a path under
// certDir), or "" when file is empty: no client certificate is asked for.
// The file is read here once, so that a missing or unparsable CA stops the
// manager with a message before anything is served.
func clientCAName(certDir, file string) (string, error) {
	if file == "" {
		return "", nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("reading the gate's client CA: %w", err)
	}
	if !x509.NewCertPool().AppendCertsFromPEM(data) {
		return "", fmt.Errorf("the gate's client CA %s holds no PEM certificate", file)
	}
	absFile, err := filepath.Abs(file)
	if err != nil {
		return "", fmt.Errorf("resolving the gate's client CA %s: %w", file, err)
	}
	absDir, err := filepath.Abs(certDir)
	if err != nil {
		return "", fmt.Errorf("resolving the gate's certificate directory %s: %w", certDir, err)
	}
	// The server joins the name to its certificate directory: a path
	// relative to it reaches a CA mounted anywhere.
	rel, err := filepath.Rel(absDir, absFile)
	if err != nil {
		return "", fmt.Errorf("locating the gate's client CA %s from %s: %w", file, certDir, err)
	}
	return rel, nil
}
