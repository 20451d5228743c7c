package manager

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclientset "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/config"
)

// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,resourceNames=diskschedules.longhorn.io,verbs=get

// diskScheduleCRDName is the name of the DiskSchedule CRD.
const diskScheduleCRDName = DiskScheduleResource + ".longhorn.io"

// foreignCRD returns why the DiskSchedule CRD on the cluster is not the one
// this manager installs (config.DiskScheduleCRD), or "": its served version's
// schema must have exactly the fields of the add-on's. Longhorn's own
// enhancement proposals use the name DiskSchedule too; a CRD of that name
// that is not the add-on's must never be shared silently.
func foreignCRD(ctx context.Context, cfg *rest.Config) (string, error) {
	want := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(config.DiskScheduleCRD, want); err != nil {
		return "", fmt.Errorf("reading the add-on's own DiskSchedule CRD: %w", err)
	}
	cs, err := apiextensionsclientset.NewForConfig(cfg)
	if err != nil {
		return "", fmt.Errorf("creating an apiextensions client: %w", err)
	}
	got, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, diskScheduleCRDName, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading the CRD %s to check it is the add-on's: %w", diskScheduleCRDName, err)
	}
	return crdDifference(want, got), nil
}

// crdDifference says how got's schema of DiskSchedule's version differs from
// want's, or "" when they have the same fields and kind.
func crdDifference(want, got *apiextensionsv1.CustomResourceDefinition) string {
	if got.Spec.Names.Kind != want.Spec.Names.Kind || got.Spec.Scope != want.Spec.Scope {
		return fmt.Sprintf("it defines %s kind %s, the add-on's defines %s kind %s",
			got.Spec.Scope, got.Spec.Names.Kind, want.Spec.Scope, want.Spec.Names.Kind)
	}
	wantFields, gotFields := schemaFields(want), schemaFields(got)
	if gotFields == nil {
		return fmt.Sprintf("it serves no %s schema", dsv1.GroupVersion.Version)
	}
	var missing, extra []string
	for f := range wantFields {
		if !gotFields[f] {
			missing = append(missing, f)
		}
	}
	for f := range gotFields {
		if !wantFields[f] {
			extra = append(extra, f)
		}
	}
	if len(missing) == 0 && len(extra) == 0 {
		return ""
	}
	var parts []string
	if len(missing) > 0 {
		parts = append(parts, "it lacks "+firstFields(missing))
	}
	if len(extra) > 0 {
		parts = append(parts, "it has "+firstFields(extra)+", which the add-on's does not")
	}
	return strings.Join(parts, "; ")
}

// firstFields lists up to five of fields, sorted, and how many more.
func firstFields(fields []string) string {
	slices.Sort(fields)
	if len(fields) <= 5 {
		return strings.Join(fields, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(fields[:5], ", "), len(fields)-5)
}

// schemaFields returns the field paths of crd's served DiskSchedule version
// ("spec.replicas", "status.conditions[].type"), or nil when it has none.
func schemaFields(crd *apiextensionsv1.CustomResourceDefinition) map[string]bool {
	for _, v := range crd.Spec.Versions {
		if v.Name != dsv1.GroupVersion.Version || !v.Served || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		out := map[string]bool{}
		addFields(out, "", v.Schema.OpenAPIV3Schema)
		return out
	}
	return nil
}

// addFields adds the paths of s's properties under prefix, recursively.
func addFields(out map[string]bool, prefix string, s *apiextensionsv1.JSONSchemaProps) {
	for name, p := range s.Properties {
		if prefix == "" && (name == "apiVersion" || name == "kind" || name == "metadata") {
			continue
		}
		path := strings.TrimPrefix(prefix+"."+name, ".")
		out[path] = true
		addFields(out, path, &p)
	}
	if s.Items != nil && s.Items.Schema != nil {
		addFields(out, prefix+"[]", s.Items.Schema)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		addFields(out, prefix+"{}", s.AdditionalProperties.Schema)
	}
}
