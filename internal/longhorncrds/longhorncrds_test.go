package longhorncrds

import (
	"testing"
)

// TestLoad reads Longhorn v1.12.0's own crds.yaml from the module cache and
// finds the kinds diskschedule reads, serving v1beta2, with the Helm labels
// template rendered.
func TestLoad(t *testing.T) {
	crds, err := Load()
	if err != nil {
		t.Fatal(err)
	}
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
