package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	componentbaseconfigv1alpha1 "k8s.io/component-base/config/v1alpha1"
	schedulerconfigv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/longhorn/diskschedule/test/infrastructure/controlplane"
	"github.com/longhorn/diskschedule/test/infrastructure/simcluster"
)

// Client rate limits of the sandbox's kube-scheduler: high enough that they
// never bound its throughput on one machine (its defaults, 50 and 100, do
// at a few hundred pods per second).
const (
	SchedulerQPS   = 5000
	SchedulerBurst = 10000
)

// SchedulerHTTPTimeout is the sandbox's kube-scheduler's extender
// httpTimeout: it covers a filter that waits for pods in flight
// (scheduler-extender-pod-scheduling-timeout, 5 s by default) and equals
// the manager's default leader fence.
const SchedulerHTTPTimeout = 10 * time.Second

// SchedulerConfig returns kube-scheduler's configuration for the sandbox:
// no leader election, the API server reached through kubeconfig, and, when
// extenderURL is not empty, the diskschedule extender at extenderURL
// (HTTPS, with tlsConfig's client certificate and CA) for pods that
// request the longhorn.io/scheduler-extender resource; with bind,
// kube-scheduler binds those pods through the extender's /bind.
func SchedulerConfig(kubeconfig, extenderURL string, bind bool, tlsConfig *schedulerconfigv1.ExtenderTLSConfig) *schedulerconfigv1.KubeSchedulerConfiguration {
	cfg := &schedulerconfigv1.KubeSchedulerConfiguration{
		TypeMeta:       metav1.TypeMeta{APIVersion: schedulerconfigv1.SchemeGroupVersion.String(), Kind: "KubeSchedulerConfiguration"},
		LeaderElection: componentbaseconfigv1alpha1.LeaderElectionConfiguration{LeaderElect: ptr.To(false)},
		ClientConnection: componentbaseconfigv1alpha1.ClientConnectionConfiguration{Kubeconfig: kubeconfig,
			QPS: SchedulerQPS, Burst: SchedulerBurst},
	}
	if extenderURL != "" {
		cfg.Extenders = []schedulerconfigv1.Extender{{
			URLPrefix:        extenderURL,
			EnableHTTPS:      true,
			TLSConfig:        tlsConfig,
			FilterVerb:       "filter",
			PrioritizeVerb:   "prioritize",
			Weight:           1,
			NodeCacheCapable: true,
			Ignorable:        false,
			HTTPTimeout:      metav1.Duration{Duration: SchedulerHTTPTimeout},
			ManagedResources: []schedulerconfigv1.ExtenderManagedResource{
				{Name: string(simcluster.ExtendedResource), IgnoredByScheduler: true},
			},
		}}
		if bind {
			cfg.Extenders[0].BindVerb = "bind"
		}
	}
	return cfg
}

// MarshalSchedulerConfig writes cfg as YAML, leaving out the fields it
// leaves unset, so that kube-scheduler defaults them.
func MarshalSchedulerConfig(cfg *schedulerconfigv1.KubeSchedulerConfiguration) ([]byte, error) {
	data, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encoding the kube-scheduler configuration: %w", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("encoding the kube-scheduler configuration: %w", err)
	}
	pruneZero(doc)
	return yaml.Marshal(doc)
}

// pruneZero removes empty strings, zero numbers, zero durations, nulls and
// empty maps and lists from a decoded JSON document. Booleans are kept.
func pruneZero(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case string:
		return t == "" || t == "0s"
	case float64:
		return t == 0
	case map[string]any:
		for k, e := range t {
			if pruneZero(e) {
				delete(t, k)
			}
		}
		return len(t) == 0
	case []any:
		for _, e := range t {
			pruneZero(e)
		}
		return len(t) == 0
	}
	return false
}

// startScheduler starts kube-scheduler with the configuration file at
// configPath, serving on 127.0.0.1:port, and waits until it is healthy.
// Without delegated authentication and authorization, only its
// always-allowed paths (/healthz, /readyz, /livez) answer; that is all the
// sandbox reads.
func startScheduler(ctx context.Context, path, configPath string, port int, out io.Writer) (*controlplane.Process, error) {
	return startSchedulerBinary(ctx, "kube-scheduler", path, configPath, port, 30*time.Second, out)
}

// startSchedulerBinary starts the kube-scheduler build at path (name in
// errors and logs) as startScheduler does, waiting at most healthy for it
// to be healthy, with extra arguments after its own.
func startSchedulerBinary(ctx context.Context, name, path, configPath string, port int, healthy time.Duration, out io.Writer, extra ...string) (*controlplane.Process, error) {
	args := []string{
		"--config=" + configPath,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--v=2",
	}
	args = append(args, extra...)
	p, err := controlplane.StartProcess(name, path, args, out)
	if err != nil {
		return nil, err
	}
	if err := p.WaitHealthy(ctx, fmt.Sprintf("https://127.0.0.1:%d/healthz", port), healthy); err != nil {
		return nil, err
	}
	return p, nil
}
