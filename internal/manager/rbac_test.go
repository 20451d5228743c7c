package manager_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/longhorn/diskschedule/internal/gate"
	"github.com/longhorn/diskschedule/internal/manager"
	"github.com/longhorn/diskschedule/test/framework/managertest"
	"github.com/longhorn/diskschedule/test/framework/testenv"
	"github.com/longhorn/diskschedule/test/infrastructure/controlplane"
)

// TestGateUnderItsRBAC runs the manager with the admission gate under the
// manager's generated RBAC (config/rbac/role.yaml), which names the one
// Secret and the one webhook configuration it keeps: the certificate
// rotator fills the Secret and injects the CA into diskschedule-gate,
// listing and watching both by name, and nothing the manager sends is
// refused. The manager may not read another Secret of Longhorn's namespace
// (Longhorn keeps its backup-target credentials there), nor list Secrets,
// nor touch another webhook configuration.
func TestGateUnderItsRBAC(t *testing.T) {
	ctx := t.Context()
	ns := env.NewNamespace(t)
	user := "system:serviceaccount:" + ns + ":diskschedule-manager"
	grantRole(t, ctx, ns, user)
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: gate.DefaultSecretName}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "backup-target-credentials"}, StringData: map[string]string{"AWS_SECRET_ACCESS_KEY": "x"}},
	} {
		if err := env.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	vwc, err := gate.LocalConfiguration("https://localhost:1", ns)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, vwc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), vwc) })

	cfg, err := env.AddUser(user)
	if err != nil {
		t.Fatal(err)
	}
	port, err := controlplane.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	a := &audit{}
	m, err := managertest.Start(env, a.wrap(cfg), manager.Options{Namespace: ns, Gate: &manager.GateOptions{
		Host: "127.0.0.1", Port: port,
		TLS: gate.TLS{DNSName: "localhost", CertDir: filepath.Join(t.TempDir(), "certs"), ControllerName: "rbac-" + ns},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Stop() })

	testenv.Eventually(t, ctx, 30*time.Second, "the rotator filled the gate's Secret and injected its CA", func(ctx context.Context) (bool, string, error) {
		s := &corev1.Secret{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: gate.DefaultSecretName}, s); err != nil {
			return false, "", err
		}
		got := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: gate.ConfigurationName}, got); err != nil {
			return false, "", err
		}
		injected := 0
		for _, wh := range got.Webhooks {
			if len(wh.ClientConfig.CABundle) > 0 {
				injected++
			}
		}
		return len(s.Data[corev1.TLSCertKey]) > 0 && injected == len(got.Webhooks),
			fmt.Sprintf("Secret keys %d, caBundle in %d of %d webhooks, refused %v", len(s.Data), injected, len(got.Webhooks), a.refusals()), nil
	})
	for _, r := range a.refusals() {
		t.Errorf("the manager was refused: %s", r)
	}

	mc, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		attrs authorizationv1.ResourceAttributes
		want  bool
	}{
		{authorizationv1.ResourceAttributes{Namespace: ns, Verb: "get", Resource: "secrets", Name: gate.DefaultSecretName}, true},
		{authorizationv1.ResourceAttributes{Namespace: ns, Verb: "update", Resource: "secrets", Name: gate.DefaultSecretName}, true},
		{authorizationv1.ResourceAttributes{Namespace: ns, Verb: "get", Resource: "secrets", Name: "backup-target-credentials"}, false},
		{authorizationv1.ResourceAttributes{Namespace: ns, Verb: "list", Resource: "secrets"}, false},
		{authorizationv1.ResourceAttributes{Namespace: ns, Verb: "watch", Resource: "secrets"}, false},
		{authorizationv1.ResourceAttributes{Verb: "update", Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations", Name: gate.ConfigurationName}, true},
		{authorizationv1.ResourceAttributes{Verb: "update", Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations", Name: "longhorn-webhook-validator"}, false},
		{authorizationv1.ResourceAttributes{Verb: "list", Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations"}, false},
		{authorizationv1.ResourceAttributes{Verb: "delete", Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations", Name: gate.ConfigurationName}, false},
		{authorizationv1.ResourceAttributes{Namespace: ns, Verb: "update", Group: "discovery.k8s.io", Resource: "endpointslices", Name: "longhorn-scheduler-extender"}, true},
		{authorizationv1.ResourceAttributes{Namespace: ns, Verb: "update", Group: "discovery.k8s.io", Resource: "endpointslices", Name: "longhorn-backend"}, false},
		{authorizationv1.ResourceAttributes{Namespace: "default", Verb: "create", Group: "discovery.k8s.io", Resource: "endpointslices"}, false},
		{authorizationv1.ResourceAttributes{Namespace: ns, Verb: "get", Resource: "configmaps", Name: "longhorn-default-setting"}, false},
	} {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &c.attrs}}
		if err := mc.Create(ctx, review); err != nil {
			t.Fatal(err)
		}
		if review.Status.Allowed != c.want {
			t.Errorf("the manager may %s %s.%s %q in %q: %v, want %v", c.attrs.Verb, c.attrs.Resource, c.attrs.Group,
				c.attrs.Name, c.attrs.Namespace, review.Status.Allowed, c.want)
		}
	}
}
