package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/longhorn/diskschedule/test/framework/testenv"
)

// TestKilledSandboxLeavesNothingRunning builds the sandbox command, starts
// it with the second scheduler and without the extender (which the second
// scheduler's plugin does not need), and once it is ready kills it with
// SIGKILL, which it cannot catch: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and diskschedule-scheduler, its
// children, must all be gone shortly after, and its working directory too.
func TestKilledSandboxLeavesNothingRunning(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sandbox")
	}
	root := testenv.RepoRoot()
	dir := t.TempDir()
	bin := filepath.Join(dir, "sandbox")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("building the sandbox: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin,
		"--topology", filepath.Join(root, "config", "sandbox", "topology.yaml"),
		"--config-dir", filepath.Join(root, "config"),
		"--kubeconfig", filepath.Join(dir, "kubeconfig"),
		"--log-dir", filepath.Join(dir, "logs"),
		"--secondary-scheduler=true", "--extender=false")
	cmd.Env = append(os.Environ(), "KUBEBUILDER_ASSETS="+testenv.AssetsDir())
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	ready := make(chan struct{})
	var lines []string
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines = append(lines, sc.Text())
			if sc.Text() == "sandbox ready" {
				close(ready)
			}
		}
	}()
	select {
	case <-ready:
	case <-ctx.Done():
		t.Fatalf("the sandbox was not ready in time:\n%s", strings.Join(lines, "\n"))
	}

	children := childrenOf(t, cmd.Process.Pid)
	names := map[string]bool{}
	for _, c := range children {
		names[c.name] = true
	}
	for _, want := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "diskschedule-scheduler"} {
		if !names[want[:min(len(want), 15)]] { // the kernel keeps 15 bytes of a command's name
			t.Fatalf("the sandbox's children %v do not include %s", children, want)
		}
	}
	workDir := sandboxDir(children)
	if workDir == "" {
		t.Fatalf("no argument of the sandbox's children names its working directory")
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	_, err = testenv.Poll(ctx, 20*time.Second, func(context.Context) (bool, string, error) {
		for _, c := range children {
			if c.name != "sh" && alive(c.pid) {
				return false, "", nil
			}
		}
		_, err := os.Stat(workDir)
		return os.IsNotExist(err), "", nil
	}, testenv.Every(100*time.Millisecond))
	if err != nil {
		var left []string
		for _, c := range children {
			if alive(c.pid) {
				left = append(left, fmt.Sprintf("%s (pid %d)", c.name, c.pid))
			}
		}
		if _, err := os.Stat(workDir); err == nil {
			left = append(left, "its working directory "+workDir)
		}
		t.Fatalf("20s after the sandbox was killed, still there: %s", strings.Join(left, ", "))
	}
}

// sandboxDir returns the sandbox's working directory as the arguments of
// one of its children name it (kube-controller-manager's files live there).
func sandboxDir(children []child) string {
	for _, c := range children {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", c.pid))
		if err != nil {
			continue
		}
		for _, arg := range strings.Split(string(cmdline), "\x00") {
			_, value, _ := strings.Cut(arg, "=")
			for dir := value; dir != "/" && dir != "." && dir != ""; dir = filepath.Dir(dir) {
				if strings.HasPrefix(filepath.Base(dir), "diskschedule-sandbox-") {
					return dir
				}
			}
		}
	}
	return ""
}

// child is a process and its command name.
type child struct {
	pid  int
	name string
}

// childrenOf returns the processes whose parent is pid, from /proc.
func childrenOf(t *testing.T, pid int) []child {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	var out []child
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		s := string(stat)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < 0 {
			continue
		}
		fields := strings.Fields(s[end+1:])
		if len(fields) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(fields[1]); ppid == pid {
			out = append(out, child{pid: p, name: s[open+1 : end]})
		}
	}
	return out
}

// alive reports whether pid runs (a zombie, killed but not yet reaped by
// its new parent, does not).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(stat)
	end := strings.LastIndexByte(s, ')')
	fields := strings.Fields(s[end+1:])
	return len(fields) > 0 && fields[0] != "Z"
}
