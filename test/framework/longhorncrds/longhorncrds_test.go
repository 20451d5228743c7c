package longhorncrds

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// TestLoad reads the own crds.yaml of Longhorn v1.12.0, and of each other
// release the project is tested against, from the module cache and finds
// the kinds diskschedule reads, serving v1beta2, with the Helm labels
// template rendered.
func TestLoad(t *testing.T) {
	for _, version := range TestedVersions() {
		t.Run(version, func(t *testing.T) {
			crds, err := LoadVersion(version)
			if err != nil {
				t.Fatal(err)
			}
			checkCRDs(t, crds)
		})
	}
}

func checkCRDs(t *testing.T, crds []*apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	byName := map[string]bool{}
	for _, crd := range crds {
		if _, ok := crd.Labels["longhorn-manager"]; !ok || crd.Labels["app.kubernetes.io/name"] != "longhorn" {
			t.Errorf("%s: labels %v, want the rendered chart labels", crd.Name, crd.Labels)
		}
		for _, v := range crd.Spec.Versions {
			if v.Name == "v1beta2" && v.Served {
				byName[crd.Name] = true
			}
		}
	}
	for _, want := range []string{"nodes.longhorn.io", "volumes.longhorn.io", "replicas.longhorn.io", "backingimages.longhorn.io", "settings.longhorn.io", "engines.longhorn.io"} {
		if !byName[want] {
			t.Errorf("%s serving v1beta2 not found among %d CRDs", want, len(crds))
		}
	}
	if len(crds) < 20 {
		t.Errorf("loaded %d CRDs, want all of Longhorn's (over 20)", len(crds))
	}
}

func TestParseRefusesEmpty(t *testing.T) {
	if _, err := Parse([]byte("# nothing\n")); err == nil {
		t.Fatal("Parse of a file without CRDs succeeded")
	}
}

func TestBuildVersionMatches(t *testing.T) {
	if err := CheckBuildVersion(); err != nil {
		t.Fatal(err)
	}
}
