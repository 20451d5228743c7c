package main

import (
	"os/exec"
	"strings"
	"testing"
)

// longhornAPITypes is the only package of longhorn-manager the manager may
// import (DESIGN §3.1): Longhorn's own Go types. Its scheduler, datastore and
// everything under them belong to the sandbox's Longhorn.
const longhornAPITypes = "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"

// TestManagerImportsNoLonghornCode lists the manager binary's packages with
// the go command and fails on any longhorn-manager package other than its
// API types and what they import, and on the sandbox's simulated cluster.
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
		case strings.HasPrefix(p, "github.com/longhorn/diskschedule/internal/simcluster"),
			strings.HasPrefix(p, "github.com/longhorn/diskschedule/internal/sandbox"):
			t.Errorf("the manager imports the sandbox's %s", p)
		}
	}
	if !apiTypes {
		t.Errorf("go list -deps . does not list %s: the check is not looking at the manager (%d packages)", longhornAPITypes, len(pkgs))
	}
}

// goListDeps returns the packages pkg depends on, itself included.
func goListDeps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
	}
	return strings.Fields(string(out))
}
