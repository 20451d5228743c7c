package config_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/longhorn/diskschedule/internal/gate"
	"github.com/longhorn/diskschedule/internal/manager"
	"github.com/longhorn/diskschedule/internal/uninstall"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

// runbookStep is one command of docs/operations.md, as the test runs it.
type runbookStep struct {
	// command is the line of docs/operations.md the step runs.
	command string
	// run does what the command does and checks what the runbook says of it.
	run func(ctx context.Context) error
}

// TestRunbook runs docs/operations.md as written, each command a step,
// against an API server that serves Longhorn v1.12.0's CRDs: install; the
// way out deletes diskschedule-gate, and a manager starting then finds it
// missing (so serves no gate and re-creates nothing); the way back creates
// it again as the release has it and restarts the managers; taking the
// add-on off before Longhorn ships its own DiskSchedule CRD deletes the
// add-on's CRD and none of Longhorn's; with Longhorn's own CRD of that name
// on the cluster, helm install stops with a message naming it and creates
// nothing. Every command must appear in docs/operations.md verbatim.
func TestRunbook(t *testing.T) {
	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	h := startHelm(t)
	env, cfg, c, helm, chrt := h.env, h.cfg, h.client, h.helm, h.chart
	ctx := t.Context()
	gateKey := client.ObjectKey{Name: gate.ConfigurationName}
	deployment := client.ObjectKey{Namespace: namespace, Name: "longhorn-diskschedule-controller-manager"}
	longhornCRDs := func(ctx context.Context) (int, error) {
		list := &apiextensionsv1.CustomResourceDefinitionList{}
		if err := c.List(ctx, list); err != nil {
			return 0, fmt.Errorf("listing CRDs: %w", err)
		}
		n := 0
		for _, crd := range list.Items {
			if crd.Spec.Group == "longhorn.io" && crd.Name != uninstall.CRDName {
				n++
			}
		}
		return n, nil
	}
	longhornBefore, err := longhornCRDs(ctx)
	if err != nil || longhornBefore == 0 {
		t.Fatalf("Longhorn's CRDs before the runbook: %d (%v)", longhornBefore, err)
	}
	install := func(ctx context.Context) error {
		in := action.NewInstall(helm)
		in.ReleaseName, in.Namespace = "diskschedule", namespace
		_, err := in.RunWithContext(ctx, chrt, nil)
		return err
	}

	steps := []runbookStep{
		{"helm install diskschedule ./dist/chart --namespace longhorn-system", func(ctx context.Context) error {
			if err := install(ctx); err != nil {
				return err
			}
			return gateIs(ctx, c, admissionregistrationv1.Fail)
		}},
		{"kubectl delete validatingwebhookconfiguration diskschedule-gate", func(ctx context.Context) error {
			wh := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: gate.ConfigurationName}}
			if err := c.Delete(ctx, wh); err != nil {
				return err
			}
			if err := gone(ctx, c, gateKey, wh); err != nil {
				return err
			}
			// A manager starting now finds the configuration missing,
			// serves no gate and creates none.
			why, err := manager.GateMissing(ctx, cfg, namespace, "")
			if err != nil {
				return err
			}
			if !strings.Contains(why, gate.ConfigurationName+" is not installed") {
				return fmt.Errorf("a manager starting after the way out would serve the gate: %q", why)
			}
			return nil
		}},
		{"helm upgrade diskschedule ./dist/chart --namespace longhorn-system --reuse-values", func(ctx context.Context) error {
			up := action.NewUpgrade(helm)
			up.Namespace, up.ReuseValues = namespace, true
			if _, err := up.RunWithContext(ctx, "diskschedule", chrt, nil); err != nil {
				return err
			}
			return gateIs(ctx, c, admissionregistrationv1.Fail)
		}},
		{"kubectl -n longhorn-system rollout restart deployment longhorn-diskschedule-controller-manager", func(ctx context.Context) error {
			d := &appsv1.Deployment{}
			if err := c.Get(ctx, deployment, d); err != nil {
				return err
			}
			patch := client.MergeFrom(d.DeepCopy())
			if d.Spec.Template.Annotations == nil {
				d.Spec.Template.Annotations = map[string]string{}
			}
			d.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] = time.Now().Format(time.RFC3339)
			if err := c.Patch(ctx, d, patch); err != nil {
				return err
			}
			if d.Generation < 2 {
				return fmt.Errorf("the Deployment's generation %d: the restart changed nothing", d.Generation)
			}
			return nil
		}},
		{"helm uninstall diskschedule --namespace longhorn-system", func(ctx context.Context) error {
			hook := make(chan error, 1)
			go func() { hook <- runHook(ctx, env, c) }()
			un := action.NewUninstall(helm)
			un.Timeout = time.Minute
			if _, err := un.Run("diskschedule"); err != nil {
				return err
			}
			if err := <-hook; err != nil {
				return fmt.Errorf("the pre-delete hook: %w", err)
			}
			return gone(ctx, c, gateKey, &admissionregistrationv1.ValidatingWebhookConfiguration{})
		}},
		{"kubectl delete crd -l app.kubernetes.io/name=diskschedule", func(ctx context.Context) error {
			if err := c.DeleteAllOf(ctx, &apiextensionsv1.CustomResourceDefinition{},
				client.MatchingLabels{uninstall.LabelKey: uninstall.LabelValue}); err != nil {
				return err
			}
			if err := gone(ctx, c, client.ObjectKey{Name: uninstall.CRDName}, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
				return err
			}
			n, err := longhornCRDs(ctx)
			if err != nil {
				return err
			}
			if n != longhornBefore {
				return fmt.Errorf("%d of Longhorn's CRDs left, want all %d", n, longhornBefore)
			}
			return nil
		}},
	}
	for _, s := range steps {
		if !strings.Contains(string(doc), s.command) {
			t.Errorf("docs/operations.md does not say %q", s.command)
		}
		stepCtx, cancel := context.WithTimeout(ctx, 90*time.Second)
		err := s.run(stepCtx)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", s.command, err)
		}
	}

	// Longhorn now ships its own diskschedules.longhorn.io: the install
	// stops, names it, and creates nothing.
	if err := c.Create(ctx, longhornOwnDiskScheduleCRD()); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, ctx, 30*time.Second, "Longhorn's own DiskSchedule CRD is established", func(ctx context.Context) (bool, string, error) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: uninstall.CRDName}, crd); err != nil {
			return false, "", err
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, "", nil
			}
		}
		return false, "not established yet", nil
	})
	err = install(ctx)
	const want = "the CustomResourceDefinition diskschedules.longhorn.io on the cluster does not carry the label app.kubernetes.io/name=diskschedule"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("helm install with Longhorn's own DiskSchedule CRD: %v, want an error saying %q", err, want)
	}
	if !strings.Contains(string(doc), "When Longhorn ships its own DiskSchedule CRD") || !strings.Contains(err.Error(), "docs/operations.md") {
		t.Errorf("the refusal %q does not point at docs/operations.md's section", err)
	}
	for _, obj := range []client.Object{&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: gate.ConfigurationName}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: deployment.Namespace, Name: deployment.Name}}} {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
			t.Errorf("the refused install left %T %s (%v)", obj, obj.GetName(), err)
		}
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: uninstall.CRDName}, crd); err != nil || crd.Labels[uninstall.LabelKey] != "" {
		t.Errorf("Longhorn's own CRD after the refused install: labels %v (%v), want it untouched", crd.Labels, err)
	}
}

// gateIs checks that diskschedule-gate exists and every webhook of it has
// the failure policy want.
func gateIs(ctx context.Context, c client.Client, want admissionregistrationv1.FailurePolicyType) error {
	wh := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: gate.ConfigurationName}, wh); err != nil {
		return fmt.Errorf("reading %s: %w", gate.ConfigurationName, err)
	}
	if len(wh.Webhooks) == 0 {
		return fmt.Errorf("%s has no webhooks", gate.ConfigurationName)
	}
	for _, w := range wh.Webhooks {
		if w.FailurePolicy == nil || *w.FailurePolicy != want {
			return fmt.Errorf("webhook %s: failure policy %v, want %s", w.Name, w.FailurePolicy, want)
		}
	}
	return nil
}

// gone waits until the API server no longer has the object at key.
func gone(ctx context.Context, c client.Client, key client.ObjectKey, obj client.Object) error {
	_, err := testenv.Poll(ctx, 60*time.Second, func(ctx context.Context) (bool, string, error) {
		err := c.Get(ctx, key, obj)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		return false, fmt.Sprintf("%s still there", key.Name), err
	})
	if err != nil {
		return fmt.Errorf("waiting for %s to go: %w", key.Name, err)
	}
	return nil
}

// longhornOwnDiskScheduleCRD is a CRD named diskschedules.longhorn.io as
// a Longhorn release might ship it: without the add-on's label.
func longhornOwnDiskScheduleCRD() *apiextensionsv1.CustomResourceDefinition {
	preserve := true
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: uninstall.CRDName, Labels: map[string]string{"longhorn-manager": ""}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "longhorn.io", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "diskschedules", Singular: "diskschedule", Kind: "DiskSchedule", ListKind: "DiskScheduleList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1beta2", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: &preserve,
				}},
			}},
		},
	}
}
