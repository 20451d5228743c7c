package longhornversion

import (
	"context"
	"fmt"
	"strings"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"golang.org/x/mod/semver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SettingName is Longhorn's Setting that holds the running Longhorn
// release, as longhorn-manager writes it ("v1.12.0").
const SettingName = "current-longhorn-version"

// TestedMinors are the Longhorn minor releases the project is tested
// against: the contract tests install v1.10.0's, v1.11.1's and v1.12.0's
// own CRDs (longhorncrds.TestedVersions), and every patch release of a
// minor keeps its CRDs' schema.
func TestedMinors() []string { return []string{"v1.10", "v1.11", "v1.12"} }

// Tested reports whether version (a Setting value such as "v1.11.1" or
// "1.11.1") is a release of a tested minor.
func Tested(version string) bool {
	v := canonical(version)
	if !semver.IsValid(v) {
		return false
	}
	for _, minor := range TestedMinors() {
		if semver.MajorMinor(v) == minor {
			return true
		}
	}
	return false
}

// Assessment says in words what version means for the add-on: "" when it is
// tested, else why it may not hold.
func Assessment(version string) string {
	tested := "v1.10.x, v1.11.x and v1.12.x"
	switch {
	case version == "":
		return fmt.Sprintf("Longhorn's Setting %s is missing or empty, so the Longhorn release is not known; diskschedule is tested against %s", SettingName, tested)
	case Tested(version):
		return ""
	case !semver.IsValid(canonical(version)):
		return fmt.Sprintf("Longhorn reports the release %q, which is not a release version; diskschedule is tested against %s", version, tested)
	default:
		return fmt.Sprintf("Longhorn %s is outside the releases diskschedule is tested against (%s): the fields it reads, "+
			"what a refused write costs Longhorn's volume controller and the accounting the ledger follows may differ "+
			"(docs/longhorn-versions.md); the gate still asks the ledger, but nothing here has been checked for this release", version, tested)
	}
}

// canonical prefixes a bare version with v, as semver expects.
func canonical(version string) string {
	v := strings.TrimSpace(version)
	if v != "" && !strings.HasPrefix(v, "v") {
		v = "v" + v
	}
	return v
}

// Read returns the release Longhorn's Setting SettingName in namespace
// holds, "" when the Setting is missing.
func Read(ctx context.Context, c client.Reader, namespace string) (string, error) {
	s := &lhv1.Setting{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: SettingName}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", fmt.Errorf("reading Longhorn's Setting %s/%s: %w", namespace, SettingName, err)
	}
	return s.Value, nil
}
