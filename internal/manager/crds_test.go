package manager_test

import (
	"errors"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/longhorn/diskschedule/internal/manager"
	"github.com/longhorn/diskschedule/internal/scheme"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

// TestCheckCRDs checks that the manager finds Longhorn's CRDs on the test
// control plane, and on an API server without them refuses to start with
// an error naming every missing one.
func TestCheckCRDs(t *testing.T) {
	if err := manager.CheckCRDs(env.Config); err != nil {
		t.Fatalf("with Longhorn's CRDs installed: %v", err)
	}

	bare := &envtest.Environment{BinaryAssetsDirectory: testenv.AssetsDir()}
	cfg, err := bare.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bare.Stop() })
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	_, err = manager.New(cfg, s, manager.Options{Namespace: "longhorn-system"})
	var missing *manager.MissingCRDsError
	if !errors.As(err, &missing) || !manager.IsMissingCRDs(err) {
		t.Fatalf("starting without Longhorn's CRDs: %v, want a MissingCRDsError", err)
	}
	for _, r := range []string{"nodes.longhorn.io", "volumes.longhorn.io", "replicas.longhorn.io", "backingimages.longhorn.io",
		"settings.longhorn.io", "diskschedules.longhorn.io", "install Longhorn v1.12"} {
		if !strings.Contains(err.Error(), r) {
			t.Errorf("the error %q does not name %s", err, r)
		}
	}
}

// TestCheckCRDsRefusesAForeignDiskSchedule installs, on an API server of
// its own, a CRD named diskschedules.longhorn.io that is not the add-on's
// (as a future Longhorn shipping its own DiskSchedule would), and checks
// that the manager refuses to start, naming the CRD and how it differs.
func TestCheckCRDsRefusesAForeignDiskSchedule(t *testing.T) {
	foreign := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "diskschedules.longhorn.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "longhorn.io", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "diskschedules", Singular: "diskschedule", Kind: "DiskSchedule", ListKind: "DiskScheduleList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1beta2", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"nodeID": {Type: "string"}, "diskUUID": {Type: "string"}, "size": {Type: "integer"},
						}},
						"status": {Type: "object", XPreserveUnknownFields: ptr.To(true)},
					},
				}},
			}},
		},
	}
	bare := &envtest.Environment{BinaryAssetsDirectory: testenv.AssetsDir(), CRDs: []*apiextensionsv1.CustomResourceDefinition{foreign}}
	cfg, err := bare.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bare.Stop() })
	err = manager.CheckCRDs(cfg)
	var missing *manager.MissingCRDsError
	if !errors.As(err, &missing) || missing.Foreign == "" || missing.DiskSchedule {
		t.Fatalf("with a foreign DiskSchedule CRD: %v, want a MissingCRDsError naming it foreign", err)
	}
	for _, s := range []string{"diskschedules.longhorn.io on the cluster is not the one this add-on installs",
		"it lacks spec.backingImages", "it has spec.diskUUID, spec.size, which the add-on's does not"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("the error %q does not say %q", err, s)
		}
	}
	// The add-on's own CRD (on the shared test control plane) is not foreign.
	if err := manager.CheckCRDs(env.Config); err != nil {
		t.Errorf("with the add-on's own CRD: %v", err)
	}
}
