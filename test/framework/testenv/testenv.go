// Package testenv starts a real kube-apiserver and etcd (controller-runtime's
// envtest) with Longhorn v1.12.0's own CRDs and the DiskSchedule CRD
// installed, for every test suite that needs an API server, and runs the
// project's manager against it (StartManager). Its fixtures (longhorn.go)
// write Longhorn's objects the way longhorn-manager v1.12 does, so tests can
// play Longhorn. The binaries come from KUBEBUILDER_ASSETS when set, else
// from bin/k8s, which `make controlplane` builds from Go modules.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/longhorn/diskschedule/internal/scheme"
	"github.com/longhorn/diskschedule/test/framework/longhorncrds"
	"github.com/longhorn/diskschedule/test/infrastructure/controlplane"
)

// Env is a running test control plane.
type Env struct {
	// Config reaches the API server as an administrator.
	Config *rest.Config
	// Client is a direct (uncached) client with the project's scheme.
	Client client.Client
	// Scheme knows the built-in kinds, Longhorn's kinds and DiskSchedule.
	Scheme *k8sruntime.Scheme
	// RepoRoot is the repository's root directory.
	RepoRoot string

	env *envtest.Environment
	// reaper kills etcd, kube-apiserver and kube-controller-manager and
	// removes their directories if the test process ends without Stop.
	reaper *controlplane.Reaper
	// controllers is the kube-controller-manager StartControllerManager
	// started, if any; controllersDir holds its files.
	controllers    *controlplane.ControllerManager
	controllersDir string

	mu sync.Mutex
	// namespaces counts the namespaces NewNamespace made, by the test name
	// they came from.
	namespaces map[string]int
}

// RepoRoot returns the repository root, found from this source file's
// location rather than the test's working directory.
func RepoRoot() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		panic("testenv: cannot find the caller's source file")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// AssetsDir returns the directory holding kube-apiserver, etcd,
// kube-controller-manager and kube-scheduler.
func AssetsDir() string {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir
	}
	return filepath.Join(RepoRoot(), "bin", "k8s")
}

// Start starts etcd and kube-apiserver and installs Longhorn v1.12.0's own
// CRDs (from the longhorn-manager module) and the DiskSchedule CRD from
// config/crd/bases. Callers must call Stop.
func Start() (*Env, error) {
	return StartLonghorn(longhorncrds.Version)
}

// StartLonghorn is Start with the CRDs of another Longhorn release (one of
// longhorncrds.TestedVersions), from k8s/crds.yaml of the longhorn-manager
// module at that version.
func StartLonghorn(version string) (*Env, error) {
	root := RepoRoot()
	assets := AssetsDir()
	if _, err := os.Stat(filepath.Join(assets, "kube-apiserver")); err != nil {
		return nil, fmt.Errorf("finding the test control plane in %s (run `make controlplane`): %w", assets, err)
	}
	s, err := scheme.New()
	if err != nil {
		return nil, err
	}
	longhorn, err := longhorncrds.LoadVersion(version)
	if err != nil {
		return nil, fmt.Errorf("loading Longhorn %s's CRDs: %w", version, err)
	}
	env := &envtest.Environment{
		CRDs:                  longhorn,
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
		Scheme:                s,
	}
	// Whatever ends the test process, the control plane goes with it.
	reaper, err := controlplane.StartReaper()
	if err != nil {
		return nil, err
	}
	cfg, err := env.Start()
	if err != nil {
		// A kube-apiserver that started but never got healthy (a loaded
		// machine) is still running: envtest's Stop stops what it started.
		return nil, errors.Join(fmt.Errorf("starting the test control plane: %w", err), env.Stop(), reaper.Stop())
	}
	e := &Env{Scheme: s, RepoRoot: root, env: env, reaper: reaper}
	if _, err := controlplane.ReapEnvtest(reaper, env); err != nil {
		return nil, errors.Join(err, e.Stop())
	}
	cfg.QPS, cfg.Burst = 500, 1000
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("creating a client: %w", err), e.Stop())
	}
	e.Config, e.Client = cfg, c
	return e, nil
}

// Stop stops kube-controller-manager, if started, the API server and etcd.
func (e *Env) Stop() error {
	if e == nil || e.env == nil {
		return nil
	}
	var errs []error
	if e.controllers != nil {
		errs = append(errs, e.controllers.Stop(10*time.Second))
	}
	if e.controllersDir != "" {
		errs = append(errs, os.RemoveAll(e.controllersDir))
	}
	errs = append(errs, e.env.Stop())
	if e.reaper != nil {
		errs = append(errs, e.reaper.Stop())
	}
	return errors.Join(errs...)
}

// StartControllerManager starts kube-controller-manager with the given
// controllers (controlplane's names) next to the API server, unless it
// runs already; Stop stops it. Its log is discarded. It is not safe for
// concurrent use.
func (e *Env) StartControllerManager(ctx context.Context, controllers ...string) error {
	if e.controllers != nil {
		return nil
	}
	dir, err := os.MkdirTemp("", "diskschedule-kube-controller-manager-")
	if err != nil {
		return fmt.Errorf("creating kube-controller-manager's directory: %w", err)
	}
	cm, err := controlplane.StartControllerManager(ctx, e.env, controlplane.ControllerManagerOptions{
		Path:        filepath.Join(AssetsDir(), "kube-controller-manager"),
		Dir:         dir,
		Controllers: controllers,
	})
	if err != nil {
		return errors.Join(err, os.RemoveAll(dir))
	}
	e.controllers, e.controllersDir = cm, dir
	if err := errors.Join(e.reaper.Watch(cm.PID()), e.reaper.RemoveDir(dir)); err != nil {
		return fmt.Errorf("handing kube-controller-manager to the reaper: %w", err)
	}
	return nil
}

// AddUser returns a rest.Config for a new user of the API server with the
// given groups, authenticated by a client certificate.
func (e *Env) AddUser(name string, groups ...string) (*rest.Config, error) {
	u, err := e.env.ControlPlane.AddUser(envtest.User{Name: name, Groups: groups}, e.Config)
	if err != nil {
		return nil, fmt.Errorf("adding user %s: %w", name, err)
	}
	cfg := u.Config()
	cfg.QPS, cfg.Burst = 500, 1000
	return cfg, nil
}

// CreateNamespace creates a namespace with the given name, ignoring one that exists.
func (e *Env) CreateNamespace(ctx context.Context, name string) error {
	return scheme.EnsureNamespace(ctx, e.Client, name)
}

// NewNamespace creates a namespace named after the test, so each test owns
// its objects. A test run again in the same process (go test -count) gets a
// new one, named with a suffix: an envtest API server deletes no namespace,
// so the one before still holds the earlier run's objects.
func (e *Env) NewNamespace(t testing.TB) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-", ".", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.TrimRight(name, "-")
	e.mu.Lock()
	if e.namespaces == nil {
		e.namespaces = map[string]int{}
	}
	e.namespaces[name]++
	if n := e.namespaces[name]; n > 1 {
		name = fmt.Sprintf("%s-%d", name, n)
	}
	e.mu.Unlock()
	if err := e.CreateNamespace(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	return name
}
