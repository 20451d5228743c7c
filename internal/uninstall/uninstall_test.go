package uninstall_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/longhorn/diskschedule/internal/gate"
	"github.com/longhorn/diskschedule/internal/uninstall"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, func(e *testenv.Env) { env = e }))
}

// Webhooks deletes diskschedule-gate and returns once it is gone; run
// again, with nothing left to delete, it succeeds.
func TestWebhooks(t *testing.T) {
	ctx := t.Context()
	c, err := uninstall.NewClient(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	vwc, err := gate.LocalConfiguration("https://localhost:1", "uninstall")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, vwc); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := uninstall.Webhooks(ctx, c, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		err := c.Get(ctx, client.ObjectKey{Name: gate.ConfigurationName}, &admissionregistrationv1.ValidatingWebhookConfiguration{})
		if !apierrors.IsNotFound(err) {
			t.Fatalf("%s after Webhooks returned: %v, want it gone", gate.ConfigurationName, err)
		}
	}
}

// CRD refuses to delete a DiskSchedule CRD without the add-on's label,
// saying why, and deletes the add-on's own (config/crd, which carries it).
func TestCRD(t *testing.T) {
	ctx := t.Context()
	c, err := uninstall.NewClient(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: uninstall.CRDName}, crd); err != nil {
		t.Fatal(err)
	}
	if crd.Labels[uninstall.LabelKey] != uninstall.LabelValue {
		t.Fatalf("config/crd's DiskSchedule CRD has labels %v, want %s=%s", crd.Labels, uninstall.LabelKey, uninstall.LabelValue)
	}

	// A CRD of that name that is not the add-on's: Longhorn's, say.
	foreign := client.MergeFrom(crd.DeepCopy())
	crd.Labels = map[string]string{uninstall.LabelKey: "longhorn"}
	if err := c.Patch(ctx, crd, foreign); err != nil {
		t.Fatal(err)
	}
	err = uninstall.CRD(ctx, c)
	var refused *uninstall.RefusedError
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "does not carry the label app.kubernetes.io/name=diskschedule") {
		t.Fatalf("deleting a CRD labelled %v: %v, want a refusal that names the label", crd.Labels, err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: uninstall.CRDName}, crd); err != nil || crd.DeletionTimestamp != nil {
		t.Fatalf("the foreign CRD after the refusal: %v, deletion %v; want it untouched", err, crd.DeletionTimestamp)
	}

	// The add-on's own: deleted, and a second run finds nothing to do.
	own := client.MergeFrom(crd.DeepCopy())
	crd.Labels = map[string]string{uninstall.LabelKey: uninstall.LabelValue}
	if err := c.Patch(ctx, crd, own); err != nil {
		t.Fatal(err)
	}
	if err := uninstall.CRD(ctx, c); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, ctx, 30*time.Second, "the DiskSchedule CRD is gone", func(ctx context.Context) (bool, string, error) {
		err := c.Get(ctx, client.ObjectKey{Name: uninstall.CRDName}, &apiextensionsv1.CustomResourceDefinition{})
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		return false, "still there", err
	})
	if err := uninstall.CRD(ctx, c); err != nil {
		t.Errorf("with the CRD gone: %v, want nothing to do", err)
	}
}
