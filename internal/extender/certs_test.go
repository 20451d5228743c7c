package extender

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/longhorn/diskschedule/test/framework/testenv"
)

// The rotators fill the two empty Secrets, reading and writing them alone
// (the manager's user may touch no other Secret): a serving certificate
// for the extender Service's name and a client certificate, each verified
// by the CA in its own Secret for its own use.
func TestCertificatesFillTheirSecrets(t *testing.T) {
	env := apiServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ns := env.NewNamespace(t)
	names := []string{ServingSecretName, ClientSecretName}
	for _, name := range append(names, "longhorn-backup-credentials") {
		if err := env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "certs"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: names, Verbs: []string{"get", "list", "watch", "update"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "certs"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "extender-certs"}}}
	for _, obj := range []client.Object{role, binding} {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := env.AddUser("extender-certs")
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		// The rotators' controllers are named once per process; -count reruns.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := (Certificates{Namespace: ns, CertDir: t.TempDir(), ClientDir: t.TempDir()}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	go func() { _ = mgr.Start(ctx) }()

	check := map[string]struct {
		name  string
		usage x509.ExtKeyUsage
	}{ServingSecretName: {ServiceDNSName(ns), x509.ExtKeyUsageServerAuth}, ClientSecretName: {ClientCommonName, x509.ExtKeyUsageClientAuth}}
	cas := map[string]string{}
	for secret, want := range check {
		testenv.Eventually(t, ctx, 30*time.Second, "Secret "+secret+" filled with a valid certificate", func(ctx context.Context) (bool, string, error) {
			s := &corev1.Secret{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: secret}, s); err != nil {
				return false, "", err
			}
			if len(s.Data[corev1.TLSCertKey]) == 0 {
				return false, "empty", nil
			}
			cas[secret] = string(s.Data["ca.crt"])
			return true, "", verify(s.Data["ca.crt"], s.Data[corev1.TLSCertKey], want.name, want.usage)
		}, testenv.Every(100*time.Millisecond))
	}
	if cas[ServingSecretName] == cas[ClientSecretName] {
		t.Errorf("the serving and the client certificates share a CA, want one each")
	}
}

// verify checks that crt, PEM, is signed by ca for name and usage.
func verify(ca, crt []byte, name string, usage x509.ExtKeyUsage) error {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		return fmt.Errorf("no CA certificate")
	}
	block, _ := pem.Decode(crt)
	if block == nil {
		return fmt.Errorf("no PEM certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return fmt.Errorf("parsing the certificate: %w", err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: name, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		return fmt.Errorf("verifying the certificate of %s: %w", name, err)
	}
	return nil
}
