// Package schedulerconfig reads the second scheduler's configuration
// (DESIGN §6.1), config/scheduler/secondary/kube-scheduler-config.yaml: one
// KubeSchedulerConfiguration that config/scheduler/secondary ships in a
// ConfigMap, the chart copies (scheduler.enabled), and the sandbox runs
// pointed at its local API server and extender (Local). One file, so the
// profile a cluster gets is the profile the sandbox tests.
package schedulerconfig

import (
	"fmt"
	"net/url"

	schedulerconfigv1 "k8s.io/kube-scheduler/config/v1"
	"sigs.k8s.io/yaml"

	"github.com/longhorn/diskschedule/config"
)

// Secondary returns the second scheduler's configuration as
// config/scheduler/secondary ships it.
func Secondary() (*schedulerconfigv1.KubeSchedulerConfiguration, error) {
	return Parse(config.SecondarySchedulerConfiguration)
}

// Parse decodes a KubeSchedulerConfiguration (v1), refusing unknown fields.
func Parse(data []byte) (*schedulerconfigv1.KubeSchedulerConfiguration, error) {
	cfg := &schedulerconfigv1.KubeSchedulerConfiguration{}
	if err := yaml.UnmarshalStrict(data, cfg); err != nil {
		return nil, fmt.Errorf("decoding the second scheduler's configuration: %w", err)
	}
	if cfg.APIVersion != schedulerconfigv1.SchemeGroupVersion.String() || cfg.Kind != "KubeSchedulerConfiguration" {
		return nil, fmt.Errorf("the second scheduler's configuration is a %s %s, not a %s KubeSchedulerConfiguration",
			cfg.APIVersion, cfg.Kind, schedulerconfigv1.SchemeGroupVersion)
	}
	if len(cfg.Profiles) != 1 || len(cfg.Extenders) != 1 {
		return nil, fmt.Errorf("the second scheduler's configuration has %d profiles and %d extenders, want one of each",
			len(cfg.Profiles), len(cfg.Extenders))
	}
	return cfg, nil
}

// Local returns the second scheduler's configuration as the sandbox runs
// it: Secondary's, reaching the API server through kubeconfig with the
// given client rate limits and the extender at extenderURL
// (https://127.0.0.1:port) instead of its Service, with the client
// certificate, CA and server name of tlsConfig instead of the files the
// cluster mounts; the profile, the extender's verbs, managed resource and
// timeouts, and the leader election are the cluster's.
func Local(kubeconfig, extenderURL string, tlsConfig *schedulerconfigv1.ExtenderTLSConfig, qps float32, burst int32) (*schedulerconfigv1.KubeSchedulerConfiguration, error) {
	if u, err := url.Parse(extenderURL); err != nil || u.Scheme != "https" {
		return nil, fmt.Errorf("the second scheduler needs the extender's https URL, not %q", extenderURL)
	}
	if tlsConfig == nil {
		return nil, fmt.Errorf("the second scheduler needs a client certificate and the CA to call the extender")
	}
	cfg, err := Secondary()
	if err != nil {
		return nil, err
	}
	cfg.ClientConnection.Kubeconfig = kubeconfig
	cfg.ClientConnection.QPS, cfg.ClientConnection.Burst = qps, burst
	cfg.Extenders[0].URLPrefix = extenderURL
	cfg.Extenders[0].TLSConfig = tlsConfig
	return cfg, nil
}
