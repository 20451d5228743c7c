package manager_test

import (
	"context"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/longhorn/diskschedule/internal/gate"
	"github.com/longhorn/diskschedule/internal/manager"
)

// TestGateMissing is `make run` against a cluster where only the CRD is
// installed: the manager names what the gate lacks, and nothing once the
// webhook configuration and the certificate's Secret are there.
func TestGateMissing(t *testing.T) {
	ctx := context.Background()
	ns := env.NewNamespace(t)
	const secret = "gate-check-cert"
	why, err := manager.GateMissing(ctx, env.Config, ns, secret)
	if err != nil || !strings.Contains(why, "ValidatingWebhookConfiguration "+gate.ConfigurationName) {
		t.Fatalf("without the webhook configuration: %q, %v; want it named", why, err)
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: gate.ConfigurationName}}
	if err := env.Client.Create(ctx, vwc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), vwc) })
	why, err = manager.GateMissing(ctx, env.Config, ns, secret)
	if err != nil || !strings.Contains(why, "Secret "+ns+"/"+secret) {
		t.Fatalf("without the Secret: %q, %v; want it named", why, err)
	}
	if err := env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secret}}); err != nil {
		t.Fatal(err)
	}
	if why, err := manager.GateMissing(ctx, env.Config, ns, secret); err != nil || why != "" {
		t.Errorf("with both installed: %q, %v; want nothing missing", why, err)
	}
}
