package schedulerconfig

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	schedulermetrics "k8s.io/kubernetes/pkg/scheduler/metrics"

	configfiles "github.com/longhorn/diskschedule/config"
	"github.com/longhorn/diskschedule/internal/podmutator"
	"github.com/longhorn/diskschedule/internal/schedulerplugin"
)

// The second scheduler has one profile, the pod webhook's scheduler name,
// with the diskschedule plugin in Longhorn's namespace and no extender,
// and a lease of its own.
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
	args, err := PluginArgs(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if args.Namespace != schedulerplugin.DefaultNamespace || args.Namespace != cfg.LeaderElection.ResourceNamespace {
		t.Errorf("the plugin follows namespace %q and the lease is in %q, want both in Longhorn's %s",
			args.Namespace, cfg.LeaderElection.ResourceNamespace, schedulerplugin.DefaultNamespace)
	}
}

// kube-scheduler's own code builds the profile as the plugin build runs
// it: the configuration is valid, the diskschedule plugin is at every
// extension point it implements, before VolumeBinding at PreBind (the
// reservation decided before the claims are provisioned and attached), its
// arguments reach its factory, and NodeResourcesFit ignores the resource
// the pod opt-in webhook adds.
func TestProfileAsKubeSchedulerBuildsIt(t *testing.T) {
	obj, _, err := scheme.Codecs.UniversalDecoder().Decode(configfiles.SecondarySchedulerConfiguration, nil, nil)
	if err != nil {
		t.Fatalf("kube-scheduler does not decode the configuration: %v", err)
	}
	cfg := obj.(*config.KubeSchedulerConfiguration)
	if err := validation.ValidateKubeSchedulerConfiguration(cfg); err != nil {
		t.Fatalf("kube-scheduler refuses the configuration: %v", err)
	}
	var got schedulerplugin.Args
	registry := plugins.NewInTreeRegistry()
	if err := registry.Register(schedulerplugin.Name, func(_ context.Context, obj runtime.Object, _ fwk.Handle) (fwk.Plugin, error) {
		if u, ok := obj.(*runtime.Unknown); ok {
			if err := json.Unmarshal(u.Raw, &got); err != nil {
				return nil, err
			}
		}
		return &schedulerplugin.Plugin{}, nil
	}); err != nil {
		t.Fatal(err)
	}
	schedulermetrics.Register() // the framework counts its plugins' calls in kube-scheduler's metrics
	client := fake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fw, err := frameworkruntime.NewFramework(ctx, registry, &cfg.Profiles[0],
		frameworkruntime.WithClientSet(client), frameworkruntime.WithInformerFactory(informers.NewSharedInformerFactory(client, 0)),
		frameworkruntime.WithSnapshotSharedLister(internalcache.NewEmptySnapshot()))
	if err != nil {
		t.Fatalf("kube-scheduler does not build the profile: %v", err)
	}
	if got.Namespace != schedulerplugin.DefaultNamespace || got.DecisionTimeout == "" {
		t.Errorf("the plugin's factory got %+v, want namespace %s and a decision timeout", got, schedulerplugin.DefaultNamespace)
	}
	enabled := fw.ListPlugins()
	for point, set := range map[string]config.PluginSet{"PreFilter": enabled.PreFilter, "Filter": enabled.Filter,
		"PreScore": enabled.PreScore, "Score": enabled.Score, "Reserve": enabled.Reserve, "PreBind": enabled.PreBind} {
		if !slices.ContainsFunc(set.Enabled, func(p config.Plugin) bool { return p.Name == schedulerplugin.Name }) {
			t.Errorf("%s runs %v, without %s", point, set.Enabled, schedulerplugin.Name)
		}
	}
	var preBind []string
	for _, p := range enabled.PreBind.Enabled {
		preBind = append(preBind, p.Name)
	}
	if i, j := slices.Index(preBind, schedulerplugin.Name), slices.Index(preBind, names.VolumeBinding); i < 0 || j < 0 || i > j {
		t.Errorf("PreBind runs %v, want %s before %s", preBind, schedulerplugin.Name, names.VolumeBinding)
	}
	for _, pc := range cfg.Profiles[0].PluginConfig {
		if fit, ok := pc.Args.(*config.NodeResourcesFitArgs); ok && !slices.Contains(fit.IgnoredResources, string(podmutator.ExtendedResource)) {
			t.Errorf("NodeResourcesFit ignores %v, not %s", fit.IgnoredResources, podmutator.ExtendedResource)
		}
	}
}

// Local changes where the API server is and the client's rate limits,
// and nothing of the profile.
func TestLocal(t *testing.T) {
	cfg, err := Local("/tmp/kubeconfig", 50, 100)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Secondary()
	if err != nil {
		t.Fatal(err)
	}
	if c := cfg.ClientConnection; c.Kubeconfig != "/tmp/kubeconfig" || c.QPS != 50 || c.Burst != 100 {
		t.Errorf("client connection %+v", c)
	}
	cfg.ClientConnection = want.ClientConnection
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("Local changed more than the API server:\n%s", diff)
	}
	if _, err := Local("", 50, 100); err == nil {
		t.Errorf("Local without a kubeconfig: no error")
	}
	for _, doc := range []string{
		"apiVersion: v1\nkind: ConfigMap\n",
		"apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: diskschedule-scheduler\n",
		"apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: diskschedule-scheduler\n  plugins:\n    multiPoint:\n      enabled:\n      - name: diskschedule\nextenders:\n- urlPrefix: https://127.0.0.1:9504\n",
	} {
		if _, err := Parse([]byte(doc)); err == nil {
			t.Errorf("Parse took %q", doc)
		}
	}
}
