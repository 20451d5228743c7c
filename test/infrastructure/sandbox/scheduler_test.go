package sandbox_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	schedulerconfigv1 "k8s.io/kube-scheduler/config/v1"
	"sigs.k8s.io/yaml"

	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
)

func TestSchedulerConfig(t *testing.T) {
	tlsConfig := &schedulerconfigv1.ExtenderTLSConfig{ServerName: "longhorn-scheduler-extender.longhorn-system.svc",
		CertFile: "/tmp/client.crt", KeyFile: "/tmp/client.key", CAFile: "/tmp/ca.crt"}
	for _, tc := range []struct {
		url  string
		bind bool
	}{{"https://127.0.0.1:9504", false}, {"https://127.0.0.1:9504", true}, {"", false}} {
		url := tc.url
		t.Run(fmt.Sprintf("extender=%s,bind=%v", url, tc.bind), func(t *testing.T) {
			data, err := sandbox.MarshalSchedulerConfig(sandbox.SchedulerConfig("/tmp/kubeconfig", url, tc.bind, tlsConfig))
			if err != nil {
				t.Fatal(err)
			}
			for _, unset := range []string{`: ""`, ": 0s\n", ": null", ": 0\n", "resourceLock"} {
				if strings.Contains(string(data), unset) {
					t.Errorf("the configuration writes an unset field (%s):\n%s", unset, data)
				}
			}
			var cfg schedulerconfigv1.KubeSchedulerConfiguration
			if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
				t.Fatalf("the configuration does not decode strictly: %v\n%s", err, data)
			}
			if cfg.APIVersion != "kubescheduler.config.k8s.io/v1" || cfg.Kind != "KubeSchedulerConfiguration" {
				t.Errorf("apiVersion/kind = %s/%s", cfg.APIVersion, cfg.Kind)
			}
			if cfg.LeaderElection.LeaderElect == nil || *cfg.LeaderElection.LeaderElect {
				t.Errorf("leaderElection.leaderElect = %v, want false", cfg.LeaderElection.LeaderElect)
			}
			if cfg.ClientConnection.Kubeconfig != "/tmp/kubeconfig" {
				t.Errorf("clientConnection.kubeconfig = %q", cfg.ClientConnection.Kubeconfig)
			}
			if url == "" {
				if len(cfg.Extenders) != 0 {
					t.Errorf("extenders = %+v, want none", cfg.Extenders)
				}
				return
			}
			if len(cfg.Extenders) != 1 {
				t.Fatalf("extenders = %+v, want one", cfg.Extenders)
			}
			e := cfg.Extenders[0]
			if e.URLPrefix != url || e.FilterVerb != "filter" || e.PrioritizeVerb != "prioritize" || e.Weight != 1 ||
				!e.NodeCacheCapable || e.Ignorable || !e.EnableHTTPS || !reflect.DeepEqual(e.TLSConfig, tlsConfig) || e.HTTPTimeout.Duration != sandbox.SchedulerHTTPTimeout {
				t.Errorf("extender = %+v", e)
			}
			if want := map[bool]string{true: "bind"}[tc.bind]; e.BindVerb != want {
				t.Errorf("bindVerb = %q, want %q", e.BindVerb, want)
			}
			if cfg.ClientConnection.QPS != sandbox.SchedulerQPS || cfg.ClientConnection.Burst != sandbox.SchedulerBurst {
				t.Errorf("clientConnection qps/burst = %v/%v", cfg.ClientConnection.QPS, cfg.ClientConnection.Burst)
			}
			if len(e.ManagedResources) != 1 || e.ManagedResources[0].Name != "longhorn.io/scheduler-extender" || !e.ManagedResources[0].IgnoredByScheduler {
				t.Errorf("managedResources = %+v", e.ManagedResources)
			}
		})
	}
}
