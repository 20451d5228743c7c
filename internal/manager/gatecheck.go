package manager

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/longhorn/diskschedule/internal/gate"
)

// GateMissing says what the cluster lacks for the admission gate to be
// called (the ValidatingWebhookConfiguration gate.ConfigurationName, which
// `make deploy` and the Helm chart install) or to serve (its certificate's
// Secret in namespace), or "" when both are there. The manager binary then
// starts without the gate instead of serving a webhook nobody calls or
// failing on a Secret nobody created, as when run from a checkout against a
// cluster where only the CRD is installed.
func GateMissing(ctx context.Context, cfg *rest.Config, namespace, secretName string) (string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", fmt.Errorf("creating a client to look for the gate's configuration: %w", err)
	}
	if secretName == "" {
		secretName = gate.DefaultSecretName
	}
	_, err = cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, gate.ConfigurationName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("the ValidatingWebhookConfiguration %s is not installed", gate.ConfigurationName), nil
	case err != nil:
		return "", fmt.Errorf("reading the ValidatingWebhookConfiguration %s: %w", gate.ConfigurationName, err)
	}
	_, err = cs.CoreV1().Secrets(namespace).Get(ctx, secretName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("the Secret %s/%s for its certificate does not exist", namespace, secretName), nil
	case err != nil:
		return "", fmt.Errorf("reading the Secret %s/%s: %w", namespace, secretName, err)
	}
	return "", nil
}
