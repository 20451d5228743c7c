package main

import (
	"os"
	"os/exec"
	"path"
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

	// kubernetes is the prefix of k8s.io/kubernetes' packages: only the
	// second scheduler links them (kube-scheduler's own command and
	// framework, DESIGN §6.1); the manager imports none.
	kubernetes = "k8s.io/kubernetes/"

	// schedulerCmd is the second scheduler's binary, relative to cmd/.
	schedulerCmd = "./diskschedule-scheduler"
)

// shippedBinaries are the binaries the add-on ships, relative to cmd/: the
// manager and the second scheduler.
var shippedBinaries = []string{".", schedulerCmd}

// harnessPrefixes are where what runs or tests the add-on lives (DESIGN §9):
// the test tree and the sandbox's commands. No shipped package imports them.
var harnessPrefixes = []string{module + "/test/", module + "/cmd/sandbox"}

// TestManagerImportsNoLonghornCode lists the manager binary's packages with
// the go command and fails on any longhorn-manager package other than its
// API types and what they import, on any package of k8s.io/kubernetes, and
// on any harness package.
func TestManagerImportsNoLonghornCode(t *testing.T) {
	checkImports(t, "the manager", ".", false)
}

// TestSchedulerImportsNoLonghornCode holds the second scheduler's binary to
// the manager's rule but for k8s.io/kubernetes, which it is built from
// (kube-scheduler's command and framework).
func TestSchedulerImportsNoLonghornCode(t *testing.T) {
	kube := checkImports(t, "the second scheduler", schedulerCmd, true)
	if !kube {
		t.Errorf("go list -deps %s lists no package of %s: the check is not looking at kube-scheduler", schedulerCmd, kubernetes)
	}
}

// checkImports fails on any package binary (named what) links of
// longhorn-manager other than its API types and what they import, on any
// harness package, and, unless kubernetesAllowed, on any package of
// k8s.io/kubernetes. It reports whether binary links k8s.io/kubernetes.
func checkImports(t *testing.T, what, binary string, kubernetesAllowed bool) (kube bool) {
	t.Helper()
	allowed := map[string]bool{}
	for _, p := range goListDeps(t, longhornAPITypes) {
		allowed[p] = true
	}
	pkgs := goListDeps(t, binary)
	var apiTypes bool
	for _, p := range pkgs {
		switch {
		case p == longhornAPITypes:
			apiTypes = true
		case strings.HasPrefix(p, "github.com/longhorn/longhorn-manager/") && !allowed[p]:
			t.Errorf("%s imports %s; only %s and its imports are allowed", what, p, longhornAPITypes)
		case strings.HasPrefix(p, kubernetes):
			kube = true
			if !kubernetesAllowed {
				t.Errorf("%s imports %s; only the second scheduler (cmd/diskschedule-scheduler) links k8s.io/kubernetes", what, p)
			}
		case isHarness(p):
			t.Errorf("%s imports the harness package %s", what, p)
		}
	}
	if !apiTypes {
		t.Errorf("go list -deps %s does not list %s: the check is not looking at %s (%d packages)", binary, longhornAPITypes, what, len(pkgs))
	}
	return kube
}

// TestProductTreeIsWhatShips holds the layout of DESIGN §9: every package
// under internal/ is one the shipped binaries link, and no package of api/,
// config/ or internal/ imports a harness package outside its tests. A
// harness package put under internal/, or a product package that starts to
// import one, fails here.
func TestProductTreeIsWhatShips(t *testing.T) {
	shipped := map[string]bool{}
	for _, p := range goList(t, append([]string{"list", "-deps"}, shippedBinaries...)...) {
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

// TestDockerfileCopiesWhatTheBuildReads reads the Dockerfile's builder
// stage: every local directory go.mod's replace directives name is copied
// before `go mod download` (which fails on a replacement directory that
// does not exist), and the directory of every package of the module the
// shipped binaries link is copied before the binaries are built.
func TestDockerfileCopiesWhatTheBuildReads(t *testing.T) {
	dockerfile, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	// copied returns the sources of the COPY lines before the first RUN
	// line holding marker.
	copied := func(marker string) []string {
		var out []string
		for _, line := range strings.Split(string(dockerfile), "\n") {
			f := strings.Fields(line)
			if len(f) > 0 && f[0] == "RUN" && strings.Contains(line, marker) {
				return out
			}
			if len(f) >= 3 && f[0] == "COPY" && !strings.HasPrefix(f[1], "--from") {
				for _, src := range f[1 : len(f)-1] {
					out = append(out, strings.TrimSuffix(strings.TrimPrefix(path.Clean(src), "./"), "/*.go"))
				}
			}
		}
		t.Fatalf("the Dockerfile has no line with %q", marker)
		return nil
	}
	covers := func(srcs []string, dir string) bool {
		for _, src := range srcs {
			if dir == src || strings.HasPrefix(dir, src+"/") {
				return true
			}
		}
		return false
	}
	beforeDownload := copied("go mod download")
	var replaced int
	for _, line := range strings.Split(string(gomod), "\n") {
		if _, target, ok := strings.Cut(line, "=> ./"); ok {
			replaced++
			if dir := strings.Fields(target)[0]; !covers(beforeDownload, path.Clean(dir)) {
				t.Errorf("go.mod replaces a module with ./%s, which the Dockerfile does not copy before go mod download", dir)
			}
		}
	}
	if replaced == 0 {
		t.Error("go.mod has no replace directive to a local directory: the check is not reading it")
	}
	beforeBuild := copied("go build")
	pkgs := goList(t, append([]string{"list", "-deps"}, shippedBinaries...)...)
	var own int
	for _, p := range pkgs {
		rel, ok := strings.CutPrefix(p, module+"/")
		if !ok {
			continue
		}
		own++
		if !covers(beforeBuild, rel) {
			t.Errorf("the shipped binaries link %s, whose directory the Dockerfile does not copy before go build", p)
		}
	}
	if own == 0 {
		t.Error("the shipped binaries link no package of the module: the check is not looking at them")
	}
}
