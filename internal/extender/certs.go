package extender

import (
	"crypto/x509"
	"fmt"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/longhorn/diskschedule/internal/byname"
)

// The Secrets the manager keeps the extender's certificates in (created
// empty by the install, filled and rotated by the leader's rotators), each
// with ca.crt, tls.crt and tls.key.
const (
	// ServingSecretName holds the extender's serving certificate, issued
	// for ServiceDNSName, and its CA: kube-scheduler's tlsConfig caFile.
	ServingSecretName = "longhorn-scheduler-extender-cert"
	// ClientSecretName holds the schedulers' client certificate and its
	// CA, the one the extender verifies its callers against:
	// kube-scheduler's tlsConfig certFile and keyFile.
	ClientSecretName = "longhorn-scheduler-extender-client-cert"
)

// ClientCommonName is the common name of the schedulers' client certificate.
const ClientCommonName = "diskschedule-scheduler"

// Certificates say where the manager keeps the extender's certificates.
type Certificates struct {
	// Namespace holds the Secrets.
	Namespace string
	// CertDir is where the serving Secret's tls.crt is mounted (the
	// rotator waits for it there); ClientDir where the client Secret's is.
	CertDir, ClientDir string
}

// +kubebuilder:rbac:groups="",namespace=longhorn-system,resources=secrets,resourceNames=longhorn-scheduler-extender-cert;longhorn-scheduler-extender-client-cert,verbs=get;list;watch;update

// SetupWithManager adds to mgr the rotators (open-policy-agent/cert-controller)
// that fill and rotate the extender's serving certificate and the
// schedulers' client certificate in their Secrets, each under a CA of its
// own, on the leader. Each reads its Secret alone, by name.
func (c Certificates) SetupWithManager(mgr ctrl.Manager) error {
	for _, r := range []*rotator.CertRotator{{
		SecretKey: types.NamespacedName{Namespace: c.Namespace, Name: ServingSecretName},
		CertDir:   c.CertDir, CAName: "diskschedule-extender-ca", CAOrganization: "diskschedule",
		DNSName: ServiceDNSName(c.Namespace), ExtraDNSNames: []string{ServiceDNSName(c.Namespace) + ".cluster.local"},
		ExtKeyUsages:   &[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		ControllerName: "diskschedule-extender-serving-certificate",
	}, {
		SecretKey: types.NamespacedName{Namespace: c.Namespace, Name: ClientSecretName},
		CertDir:   c.ClientDir, CAName: "diskschedule-extender-client-ca", CAOrganization: "diskschedule",
		DNSName:        ClientCommonName,
		ExtKeyUsages:   &[]x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		ControllerName: "diskschedule-extender-client-certificate",
	}} {
		r.IsReady = make(chan struct{})
		// The leader serves the extender; one writer per Secret.
		r.RequireLeaderElection = true
		restricted := byname.Names{byname.SecretsPath(c.Namespace): r.SecretKey.Name}.Manager(mgr)
		if err := rotator.AddRotator(restricted, r); err != nil {
			return fmt.Errorf("adding the rotator of Secret %s: %w", r.SecretKey, err)
		}
	}
	return nil
}
