// Package sandboxtest starts the project's sandbox (test/infrastructure/sandbox: a
// control plane, Longhorn's CRDs, the manager and Longhorn) for
// a test or benchmark, the one way every suite that needs a whole cluster
// does. It lives apart from test/framework/testenv because the sandbox imports
// the manager, whose own tests use testenv.
package sandboxtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/longhorn/diskschedule/test/framework/testenv"
	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
)

// DefaultTimeout bounds a sandbox's start unless Options.Timeout says otherwise.
const DefaultTimeout = 3 * time.Minute

// Options say how Start starts a sandbox.
type Options struct {
	// Sandbox is the sandbox's own options. Start fills in ConfigDir and
	// AssetsDir from the repository when they are empty, LogDir with a
	// directory of the test's when it is empty, and Out, when nil, with a
	// buffer that it logs when the test fails.
	Sandbox sandbox.Options
	// Timeout bounds the start; DefaultTimeout when zero.
	Timeout time.Duration
	// DiscardLogs leaves an empty Options.Sandbox.LogDir empty: the
	// sandbox discards its logs, so a benchmark's figures do not pay for
	// writing them.
	DiscardLogs bool
	// KeepLogs puts the logs, when Options.Sandbox.LogDir is empty, in a
	// directory that is removed when the test passes and kept, its path
	// logged, when it fails, so what went wrong can be traced in the
	// managers' and Longhorn's logs.
	KeepLogs bool
	// TailLogs are log files, by name in the sandbox's log directory, whose
	// ends are logged, after kube-scheduler's, when the test fails.
	TailLogs []string
	// Strict also fails the test when a component of the sandbox stopped
	// on its own before the test ended, or one of its processes outlives
	// Stop.
	Strict bool
}

// Start starts a sandbox for t and stops it when t ends; it skips t under
// -short. When t fails, it logs the sandbox's progress (unless
// Options.Sandbox.Out took it) and the end of kube-scheduler's log; when
// Stop fails, it fails t with Stop's error, which names a file holding
// every goroutine's stack when an in-process component did not stop.
func Start(t testing.TB, opts Options) *sandbox.Sandbox {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	so := opts.Sandbox
	if so.ConfigDir == "" {
		so.ConfigDir = filepath.Join(testenv.RepoRoot(), "config")
	}
	if so.AssetsDir == "" {
		so.AssetsDir = testenv.AssetsDir()
	}
	switch {
	case so.LogDir != "", opts.DiscardLogs:
	case opts.KeepLogs:
		so.LogDir = keptDir(t)
	default:
		so.LogDir = filepath.Join(t.TempDir(), "logs")
	}
	var progress *testenv.LockedBuffer
	if so.Out == nil {
		progress = &testenv.LockedBuffer{}
		so.Out = progress
	}
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	sb, err := sandbox.Start(ctx, so)
	if err != nil {
		if progress != nil {
			t.Fatalf("starting the sandbox: %v\n%s", err, progress)
		}
		t.Fatalf("starting the sandbox: %v", err)
	}
	t.Logf("sandbox ready in %s", time.Since(start).Round(100*time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			if progress != nil {
				t.Logf("sandbox progress:\n%s", progress)
			}
			for _, name := range append([]string{"kube-scheduler.log"}, opts.TailLogs...) {
				if path := filepath.Join(so.LogDir, name); so.LogDir != "" && fileExists(path) {
					testenv.LogTail(t, path)
				}
			}
		}
		if opts.Strict {
			select {
			case <-sb.Done():
				t.Errorf("a component of the sandbox stopped on its own: %v", sb.Err())
			default:
			}
		}
		if err := sb.Stop(); err != nil {
			// A runner that does not stop names the file with the
			// goroutines' stacks at that moment (sandbox.Stop).
			t.Errorf("stopping the sandbox: %v", err)
		}
		if opts.Strict {
			for _, p := range sb.Processes() {
				if sandbox.ProcessAlive(p.PID) {
					t.Errorf("%s (pid %d) is still running after Stop", p.Name, p.PID)
				}
			}
		}
	})
	return sb
}

// Nodes returns a topology of n nodes, node-1 to node-n, each with one
// disk, disk-1, of diskSize bytes.
func Nodes(n int, diskSize int64) *sandbox.Topology {
	topo := &sandbox.Topology{}
	for i := 1; i <= n; i++ {
		topo.Nodes = append(topo.Nodes, sandbox.Node{Name: fmt.Sprintf("node-%d", i), Disks: []sandbox.Disk{{Name: "disk-1", Size: diskSize}}})
	}
	return topo
}

// keptDir returns a new directory that is removed when t passes and kept,
// its path logged, when t fails.
func keptDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "diskschedule-sandbox-logs-")
	if err != nil {
		t.Fatalf("creating a directory for the sandbox's logs: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the sandbox's logs are kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	return dir
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// Main runs a sandbox suite's tests with the process-wide loggers
// (controller-runtime's and klog's) silenced: each sandbox's managers and
// its simulated cluster log to the sandbox's own output. Call it from
// TestMain.
func Main(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard()) // client-go's leader election logs through klog
	os.Exit(m.Run())
}
