package schedulerconfig

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	schedulerconfigv1 "k8s.io/kube-scheduler/config/v1"
	"sigs.k8s.io/yaml"

	"github.com/longhorn/diskschedule/internal/podmutator"
)

// The second scheduler has one profile, the pod webhook's scheduler name,
// and the extender exactly as config/scheduler configures it for the
// default scheduler.
func TestSecondary(t *testing.T) {
	cfg, err := Secondary()
	if err != nil {
		t.Fatal(err)
	}
	if got := *cfg.Profiles[0].SchedulerName; got != podmutator.SchedulerName {
		t.Errorf("profile %q, want %s", got, podmutator.SchedulerName)
	}
	if le := cfg.LeaderElection; le.LeaderElect == nil || !*le.LeaderElect || le.ResourceName == "kube-scheduler" || le.ResourceName == "" {
		t.Errorf("leader election %+v, want a lease of its own", le)
	}
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "config", "scheduler", "kube-scheduler-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	main := struct {
		Extenders any `json:"extenders"`
	}{}
	secondary := main
	if err := yaml.Unmarshal(data, &main); err != nil {
		t.Fatal(err)
	}
	ownData, err := os.ReadFile(filepath.Join("..", "..", "..", "config", "scheduler", "secondary", "kube-scheduler-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(ownData, &secondary); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(main.Extenders, secondary.Extenders); diff != "" {
		t.Errorf("the second scheduler's extender differs from config/scheduler's (-main +secondary):\n%s", diff)
	}
}

// Local changes where the API server and the extender are, and the
// files of the extender's tlsConfig, and nothing of the profile.
func TestLocal(t *testing.T) {
	tlsConfig := &schedulerconfigv1.ExtenderTLSConfig{ServerName: "longhorn-scheduler-extender.longhorn-system.svc",
		CertFile: "/tmp/client.crt", KeyFile: "/tmp/client.key", CAFile: "/tmp/ca.crt"}
	cfg, err := Local("/tmp/kubeconfig", "https://127.0.0.1:1234", tlsConfig, 50, 100)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Secondary()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Extenders[0].URLPrefix != "https://127.0.0.1:1234" || cfg.ClientConnection.Kubeconfig != "/tmp/kubeconfig" ||
		cfg.Extenders[0].TLSConfig != tlsConfig {
		t.Errorf("extender %s with %+v, kubeconfig %s", cfg.Extenders[0].URLPrefix, cfg.Extenders[0].TLSConfig, cfg.ClientConnection.Kubeconfig)
	}
	if !want.Extenders[0].EnableHTTPS || want.Extenders[0].TLSConfig == nil || want.Extenders[0].TLSConfig.CertFile == "" {
		t.Errorf("the second scheduler's extender %+v: want HTTPS with a client certificate", want.Extenders[0])
	}
	cfg.Extenders[0].URLPrefix, cfg.Extenders[0].TLSConfig = want.Extenders[0].URLPrefix, want.Extenders[0].TLSConfig
	cfg.ClientConnection = want.ClientConnection
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("Local changed more than the API server, the extender's URL and its tlsConfig:\n%s", diff)
	}
	for _, url := range []string{"", "http://127.0.0.1:1234"} {
		if _, err := Local("/tmp/kubeconfig", url, tlsConfig, 50, 100); err == nil {
			t.Errorf("Local with extender URL %q: no error", url)
		}
	}
	if _, err := Local("/tmp/kubeconfig", "https://127.0.0.1:1234", nil, 50, 100); err == nil {
		t.Errorf("Local without a client certificate: no error")
	}
	if _, err := Parse([]byte("apiVersion: v1\nkind: ConfigMap\n")); err == nil {
		t.Errorf("Parse took a ConfigMap")
	}
}
