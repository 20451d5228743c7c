package main

import (
	"os/exec"
	"strings"
	"testing"
)

const (
	// module is the project's Go module path.
	module = "github.com/longhorn/diskschedule"

	// longhornAPITypes is the only package of longhorn-manager the manager
	// may import (DESIGN §3.1): Longhorn's own Go types. Its scheduler,
	// datastore and everything under them belong to the sandbox's Longhorn.
	longhornAPITypes = "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// harnessPrefixes are where what runs or tests the add-on lives (DESIGN §9):
// the test tree and the sandbox's commands. No shipped package imports them.
var harnessPrefixes = []string{module + "/test/", module + "/cmd/sandbox"}

// TestManagerImportsNoLonghornCode lists the manager binary's packages with
// the go command and fails on any longhorn-manager package other than its
// API types and what they import, and on any harness package.
func TestManagerImportsNoLonghornCode(t *testing.T) {
	allowed := map[string]bool{}
	for _, p := range goListDeps(t, longhornAPITypes) {
		allowed[p] = true
	}
	pkgs := goListDeps(t, ".")
	var apiTypes bool
	for _, p := range pkgs {
		switch {
		case p == longhornAPITypes:
			apiTypes = true
		case strings.HasPrefix(p, "github.com/longhorn/longhorn-manager/") && !allowed[p]:
			t.Errorf("the manager imports %s; only %s and its imports are allowed", p, longhornAPITypes)
		case isHarness(p):
			t.Errorf("the manager imports the harness package %s", p)
		}
	}
	if !apiTypes {
		t.Errorf("go list -deps . does not list %s: the check is not looking at the manager (%d packages)", longhornAPITypes, len(pkgs))
	}
}

// TestProductTreeIsWhatShips holds the layout of DESIGN §9: every package
// under internal/ is one the shipped binaries link, and no package of api/,
// config/ or internal/ imports a harness package outside its tests. A
// harness package put under internal/, or a product package that starts to
// import one, fails here.
func TestProductTreeIsWhatShips(t *testing.T) {
	shipped := map[string]bool{}
	for _, p := range goListDeps(t, ".") {
		shipped[p] = true
	}
	product := goList(t, "list", module+"/internal/...")
	if len(product) == 0 {
		t.Fatal("go list ./internal/... lists no package: the check is not looking at the tree")
	}
	for _, p := range product {
		if !shipped[p] {
			t.Errorf("%s is under internal/ but no shipped binary links it: what runs or tests the add-on belongs under test/", p)
		}
	}
	roots := append(product, goList(t, "list", module+"/api/...", module+"/config/...")...)
	for _, p := range goList(t, append([]string{"list", "-deps"}, roots...)...) {
		if isHarness(p) {
			t.Errorf("a package of api/, config/ or internal/ imports the harness package %s outside its tests", p)
		}
	}
}

// isHarness reports whether p runs or tests the add-on rather than ships.
func isHarness(p string) bool {
	for _, prefix := range harnessPrefixes {
		if strings.HasPrefix(p, prefix) {
			return true
		}
	}
	return false
}

// goListDeps returns the packages pkg depends on, itself included.
func goListDeps(t *testing.T, pkg string) []string {
	t.Helper()
	return goList(t, "list", "-deps", pkg)
}

// goList runs the go command with args and returns the packages it prints.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.Fields(string(out))
}
