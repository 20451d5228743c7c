// Package schedulerconfig reads the second scheduler's configuration
// (DESIGN §6.1), config/scheduler/secondary/kube-scheduler-config.yaml: one
// KubeSchedulerConfiguration of kube-scheduler with the diskschedule plugin
// compiled in (cmd/diskschedule-scheduler), which config/scheduler/secondary
// ships in a ConfigMap, the chart copies (scheduler.enabled), and the
// sandbox runs pointed at its local API server (Local). One file, so the
// profile a cluster gets is the profile the sandbox tests.
package schedulerconfig

import (
	"encoding/json"
	"fmt"
	"slices"

	schedulerconfigv1 "k8s.io/kube-scheduler/config/v1"
	"sigs.k8s.io/yaml"

	"github.com/longhorn/diskschedule/config"
	"github.com/longhorn/diskschedule/internal/schedulerplugin"
)

// Secondary returns the second scheduler's configuration as
// config/scheduler/secondary ships it.
func Secondary() (*schedulerconfigv1.KubeSchedulerConfiguration, error) {
	return Parse(config.SecondarySchedulerConfiguration)
}

// Parse decodes a KubeSchedulerConfiguration (v1), refusing unknown fields,
// and checks that it is a configuration of the second scheduler: one
// profile, which enables the diskschedule plugin, and no extender.
func Parse(data []byte) (*schedulerconfigv1.KubeSchedulerConfiguration, error) {
	cfg := &schedulerconfigv1.KubeSchedulerConfiguration{}
	if err := yaml.UnmarshalStrict(data, cfg); err != nil {
		return nil, fmt.Errorf("decoding the second scheduler's configuration: %w", err)
	}
	if cfg.APIVersion != schedulerconfigv1.SchemeGroupVersion.String() || cfg.Kind != "KubeSchedulerConfiguration" {
		return nil, fmt.Errorf("the second scheduler's configuration is a %s %s, not a %s KubeSchedulerConfiguration",
			cfg.APIVersion, cfg.Kind, schedulerconfigv1.SchemeGroupVersion)
	}
	if len(cfg.Profiles) != 1 || len(cfg.Extenders) != 0 {
		return nil, fmt.Errorf("the second scheduler's configuration has %d profiles and %d extenders, want one profile and no extender",
			len(cfg.Profiles), len(cfg.Extenders))
	}
	if p := cfg.Profiles[0].Plugins; p == nil || !slices.ContainsFunc(p.MultiPoint.Enabled, func(e schedulerconfigv1.Plugin) bool {
		return e.Name == schedulerplugin.Name
	}) {
		return nil, fmt.Errorf("the second scheduler's profile does not enable the %s plugin (plugins.multiPoint)", schedulerplugin.Name)
	}
	return cfg, nil
}

// PluginArgs returns the diskschedule plugin's arguments in cfg's profile
// (its pluginConfig), the zero Args when it has none.
func PluginArgs(cfg *schedulerconfigv1.KubeSchedulerConfiguration) (schedulerplugin.Args, error) {
	var args schedulerplugin.Args
	for _, pc := range cfg.Profiles[0].PluginConfig {
		if pc.Name != schedulerplugin.Name || len(pc.Args.Raw) == 0 {
			continue
		}
		if err := json.Unmarshal(pc.Args.Raw, &args); err != nil {
			return args, fmt.Errorf("decoding the %s plugin's arguments: %w", schedulerplugin.Name, err)
		}
	}
	return args, nil
}

// Local returns the second scheduler's configuration as the sandbox runs
// it: Secondary's, reaching the API server through kubeconfig with the
// given client rate limits; the profile, the plugin's arguments and the
// leader election are the cluster's.
func Local(kubeconfig string, qps float32, burst int32) (*schedulerconfigv1.KubeSchedulerConfiguration, error) {
	if kubeconfig == "" {
		return nil, fmt.Errorf("the second scheduler needs a kubeconfig to reach the API server")
	}
	cfg, err := Secondary()
	if err != nil {
		return nil, err
	}
	cfg.ClientConnection.Kubeconfig = kubeconfig
	cfg.ClientConnection.QPS, cfg.ClientConnection.Burst = qps, burst
	return cfg, nil
}
