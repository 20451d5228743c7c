package longhornversion

import (
	"strings"
	"testing"
)

func TestTested(t *testing.T) {
	for _, c := range []struct {
		version string
		tested  bool
		says    string
	}{
		{"v1.10.0", true, ""},
		{"v1.10.3", true, ""},
		{"v1.11.1", true, ""},
		{"1.12.0", true, ""},
		{"v1.12.1-rc1", true, ""},
		{"v1.9.2", false, "Longhorn v1.9.2 is outside the releases diskschedule is tested against (v1.10.x, v1.11.x and v1.12.x)"},
		{"v1.13.0", false, "Longhorn v1.13.0 is outside"},
		{"v2.0.0", false, "outside"},
		{"master-head", false, `Longhorn reports the release "master-head", which is not a release version`},
		{"", false, "current-longhorn-version is missing or empty"},
	} {
		if got := Tested(c.version); got != c.tested {
			t.Errorf("Tested(%q) = %v, want %v", c.version, got, c.tested)
		}
		got := Assessment(c.version)
		if (c.says == "") != (got == "") || !strings.Contains(got, c.says) {
			t.Errorf("Assessment(%q) = %q, want it to say %q", c.version, got, c.says)
		}
	}
}
