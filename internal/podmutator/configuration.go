package podmutator

import (
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"

	"github.com/longhorn/diskschedule/config"
)

// Configuration returns diskschedule-pods as config/webhook ships it.
func Configuration() (*admissionregistrationv1.MutatingWebhookConfiguration, error) {
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := yaml.UnmarshalStrict(config.PodWebhookConfiguration, mwc); err != nil {
		return nil, fmt.Errorf("reading config/webhook/pods.yaml: %w", err)
	}
	return mwc, nil
}

// LocalConfiguration returns diskschedule-pods as config/webhook ships it,
// pointed at baseURL (https://localhost:port) instead of the Service: the
// sandbox and the tests register the very configuration a cluster gets.
func LocalConfiguration(baseURL string) (*admissionregistrationv1.MutatingWebhookConfiguration, error) {
	mwc, err := Configuration()
	if err != nil {
		return nil, err
	}
	for i := range mwc.Webhooks {
		wh := &mwc.Webhooks[i]
		if wh.ClientConfig.Service == nil || wh.ClientConfig.Service.Path == nil {
			return nil, fmt.Errorf("webhook %s has no Service path", wh.Name)
		}
		url := strings.TrimSuffix(baseURL, "/") + *wh.ClientConfig.Service.Path
		wh.ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url}
	}
	return mwc, nil
}
