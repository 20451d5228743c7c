package config_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/longhorn/diskschedule/internal/uninstall"
	"github.com/longhorn/diskschedule/test/framework/longhorncrds"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

// hookJob is the chart's pre-delete hook Job.
const hookJob = "longhorn-diskschedule-uninstall"

// TestChartUninstallOrder installs the chart with Helm's SDK into an API
// server that serves Longhorn's own CRDs, then uninstalls it with Helm's SDK
// and watches what goes: diskschedule-gate is gone before the manager's
// Deployment and its Services, so no moment has the gate without a serving
// manager. The test plays the kubelet for the pre-delete hook's Job: it
// runs the Job's own arguments through the manager's `uninstall`
// (uninstall.Command) as the hook's ServiceAccount, under the RBAC the
// chart gives it, and marks the Job complete. The DiskSchedule CRD stays
// (crd.keep), with the add-on's label.
func TestChartUninstallOrder(t *testing.T) {
	h := startHelm(t)
	env, c, helm, chrt := h.env, h.client, h.helm, h.chart
	ctx := t.Context()
	install := action.NewInstall(helm)
	install.ReleaseName, install.Namespace = "diskschedule", namespace
	if _, err := install.Run(chrt, nil); err != nil {
		t.Fatalf("helm install: %v", err)
	}
	for _, obj := range []client.Object{
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "diskschedule-gate"}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "longhorn-diskschedule-controller-manager"}},
	} {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Fatalf("after helm install: %v", err)
		}
	}

	gone := watchDeletions(t, ctx, c)
	hook := make(chan error, 1)
	go func() { hook <- runHook(ctx, env, c) }()

	uninst := action.NewUninstall(helm)
	uninst.Timeout = time.Minute
	if _, err := uninst.Run("diskschedule"); err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
	if err := <-hook; err != nil {
		t.Fatalf("the pre-delete hook: %v", err)
	}

	want := []string{"ValidatingWebhookConfiguration diskschedule-gate", "Deployment longhorn-diskschedule-controller-manager",
		"Service longhorn-diskschedule-webhook-service", "Service longhorn-scheduler-extender", "Service longhorn-diskschedule-controller-manager-metrics-service"}
	var order []string
	testenv.Eventually(t, ctx, 30*time.Second, "the webhook configuration, the Deployment and the Services are deleted", func(context.Context) (bool, string, error) {
		order = gone()
		for _, w := range want {
			if !slices.Contains(order, w) {
				return false, fmt.Sprintf("deleted so far: %v", order), nil
			}
		}
		return true, "", nil
	})
	t.Logf("deleted, in order: %s", strings.Join(order, ", "))
	gate := slices.Index(order, want[0])
	for _, w := range want[1:] {
		if i := slices.Index(order, w); i < gate {
			t.Errorf("%s was deleted before the gate's webhook configuration: %v", w, order)
		}
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: uninstall.CRDName}, crd); err != nil {
		t.Errorf("the DiskSchedule CRD after helm uninstall (crd.keep): %v", err)
	} else if crd.Labels[uninstall.LabelKey] != uninstall.LabelValue {
		t.Errorf("the DiskSchedule CRD's labels %v lack %s=%s", crd.Labels, uninstall.LabelKey, uninstall.LabelValue)
	}
}

// runHook waits for the pre-delete hook's Job, checks that the webhook
// configuration and the managers are all still there, runs the Job's
// container arguments through uninstall.Command as the Job's
// ServiceAccount, checks that the managers are still there once the
// webhook configuration is gone, and marks the Job complete, as the Job
// controller would.
func runHook(ctx context.Context, env *envtest.Environment, c client.Client) error {
	job := &batchv1.Job{}
	_, err := testenv.Poll(ctx, 30*time.Second, func(ctx context.Context) (bool, string, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: hookJob}, job)
		if apierrors.IsNotFound(err) {
			return false, "no Job yet", nil
		}
		return err == nil, "", err
	})
	if err != nil {
		return fmt.Errorf("waiting for the Job %s: %w", hookJob, err)
	}
	spec := job.Spec.Template.Spec
	if len(spec.Containers) != 1 || len(spec.Containers[0].Args) == 0 || spec.Containers[0].Args[0] != "uninstall" {
		return fmt.Errorf("the hook's containers %+v do not run `manager uninstall`", spec.Containers)
	}
	if err := managersServe(ctx, c, true); err != nil {
		return fmt.Errorf("when the hook starts: %w", err)
	}
	user, err := env.AddUser(envtest.User{
		Name:   "system:serviceaccount:" + namespace + ":" + spec.ServiceAccountName,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace},
	}, nil)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if err := uninstall.Command(ctx, user.Config(), spec.Containers[0].Args[1:], &out); err != nil {
		return fmt.Errorf("uninstall %v as %s: %w (%s)", spec.Containers[0].Args[1:], spec.ServiceAccountName, err, out.String())
	}
	if err := managersServe(ctx, c, false); err != nil {
		return fmt.Errorf("when the hook's uninstall returns: %w", err)
	}
	now := metav1.Now()
	job.Status = batchv1.JobStatus{StartTime: &now, CompletionTime: &now, Succeeded: 1, Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
	}}
	if err := c.Status().Update(ctx, job); err != nil {
		return fmt.Errorf("completing the Job %s: %w", hookJob, err)
	}
	return nil
}

// managersServe checks that the manager's Deployment and the gate's Service
// exist, and that the gate's webhook configuration does (gate) or does not.
func managersServe(ctx context.Context, c client.Client, gate bool) error {
	for _, obj := range []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "longhorn-diskschedule-controller-manager"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "longhorn-diskschedule-webhook-service"}},
	} {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil || obj.GetDeletionTimestamp() != nil {
			return fmt.Errorf("%T %s is going or gone (%v)", obj, obj.GetName(), err)
		}
	}
	err := c.Get(ctx, client.ObjectKey{Name: "diskschedule-gate"}, &admissionregistrationv1.ValidatingWebhookConfiguration{})
	switch {
	case gate && err != nil:
		return fmt.Errorf("diskschedule-gate: %w", err)
	case !gate && !apierrors.IsNotFound(err):
		return fmt.Errorf("diskschedule-gate is still there (%v)", err)
	}
	return nil
}

// watchDeletions watches the webhook configurations, Deployments and
// Services and returns what has been deleted so far, in the order the
// watches saw it ("Kind name").
func watchDeletions(t *testing.T, ctx context.Context, c client.WithWatch) func() []string {
	t.Helper()
	var mu sync.Mutex
	var order []string
	for _, w := range []struct {
		kind string
		list client.ObjectList
		opts []client.ListOption
	}{
		{"ValidatingWebhookConfiguration", &admissionregistrationv1.ValidatingWebhookConfigurationList{}, nil},
		{"Deployment", &appsv1.DeploymentList{}, []client.ListOption{client.InNamespace(namespace)}},
		{"Service", &corev1.ServiceList{}, []client.ListOption{client.InNamespace(namespace)}},
	} {
		watcher, err := c.Watch(ctx, w.list, w.opts...)
		if err != nil {
			t.Fatalf("watching %ss: %v", w.kind, err)
		}
		t.Cleanup(watcher.Stop)
		go func() {
			for ev := range watcher.ResultChan() {
				if ev.Type != watch.Deleted {
					continue
				}
				if obj, ok := ev.Object.(client.Object); ok {
					mu.Lock()
					order = append(order, w.kind+" "+obj.GetName())
					mu.Unlock()
				}
			}
		}()
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(order)
	}
}

// startLonghornAPIServer starts a test API server that serves Longhorn
// v1.12.0's own CRDs and nothing of the add-on, with Longhorn's namespace.
func startLonghornAPIServer(t *testing.T) (*envtest.Environment, *rest.Config) {
	t.Helper()
	longhorn, err := longhorncrds.Load()
	if err != nil {
		t.Fatal(err)
	}
	env := &envtest.Environment{CRDs: longhorn, BinaryAssetsDirectory: testenv.AssetsDir()}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting the test control plane: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Longhorn's namespace: Longhorn creates it, the chart does not.
	if err := c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		t.Fatal(err)
	}
	return env, cfg
}

// helmTarget is an API server serving Longhorn's CRDs (startLonghornAPIServer),
// with a client that watches, a Helm configuration as an administrator and
// the chart.
type helmTarget struct {
	env    *envtest.Environment
	cfg    *rest.Config
	client client.WithWatch
	helm   *action.Configuration
	chart  *chart.Chart
}

// startHelm starts a helmTarget.
func startHelm(t *testing.T) helmTarget {
	t.Helper()
	env, cfg := startLonghornAPIServer(t)
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: uninstallScheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	chrt, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	return helmTarget{env: env, cfg: cfg, client: c, helm: helmConfig(t, env), chart: chrt}
}

// helmConfig returns a Helm action configuration for the API server of env,
// as an administrator, with releases kept in memory.
func helmConfig(t *testing.T, env *envtest.Environment) *action.Configuration {
	t.Helper()
	admin, err := env.AddUser(envtest.User{Name: "helm", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	flags := genericclioptions.NewConfigFlags(false)
	ns := namespace
	flags.KubeConfig, flags.Namespace = &path, &ns
	helm := &action.Configuration{}
	if err := helm.Init(flags, namespace, "memory", t.Logf); err != nil {
		t.Fatalf("initialising Helm: %v", err)
	}
	// The test control plane, built from source, reports no version of its
	// own: it is kubeVersion's.
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = *kubeVersion
	helm.Capabilities = caps
	return helm
}

// uninstallScheme knows the kinds the uninstall test reads.
func uninstallScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme,
		admissionregistrationv1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// TestUndeployLeavesTheCRD checks what `make undeploy` hands kubectl
// delete: config/undeploy is config/default without the DiskSchedule CRD,
// which only `manager uninstall --crd` deletes, after checking its label.
func TestUndeployLeavesTheCRD(t *testing.T) {
	var want []string
	for _, u := range renderKustomization(t, "default") {
		if u.GetKind() != "CustomResourceDefinition" {
			want = append(want, key(u))
		}
	}
	var got []string
	for _, u := range renderKustomization(t, "undeploy") {
		got = append(got, key(u))
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("config/undeploy renders %v, want config/default without the CRD: %v", got, want)
	}
}
