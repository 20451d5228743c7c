package gate

import (
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"

	"github.com/longhorn/diskschedule/config"
)

// LocalConfiguration returns the gate's ValidatingWebhookConfiguration as
// config/webhook ships it, with every webhook pointed at baseURL
// (https://localhost:port) instead of the Service and scoped to namespace:
// the sandbox and the tests register the very configuration a cluster gets.
func LocalConfiguration(baseURL, namespace string) (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := yaml.UnmarshalStrict(config.GateWebhookConfiguration, vwc); err != nil {
		return nil, fmt.Errorf("reading config/webhook/manifests.yaml: %w", err)
	}
	for i := range vwc.Webhooks {
		wh := &vwc.Webhooks[i]
		if wh.ClientConfig.Service == nil || wh.ClientConfig.Service.Path == nil {
			return nil, fmt.Errorf("webhook %s has no Service path", wh.Name)
		}
		url := strings.TrimSuffix(baseURL, "/") + *wh.ClientConfig.Service.Path
		wh.ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url}
		if wh.NamespaceSelector != nil {
			wh.NamespaceSelector.MatchLabels = map[string]string{"kubernetes.io/metadata.name": namespace}
		}
	}
	return vwc, nil
}
