package testenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// killedChildEnv, when set, makes TestKilledTestLeavesNothingRunning the
// child: it starts a control plane, prints the PIDs of etcd and
// kube-apiserver and waits to be killed.
const killedChildEnv = "DISKSCHEDULE_TESTENV_KILLED_CHILD"

// TestKilledTestLeavesNothingRunning runs this test binary again as a test
// that starts etcd and kube-apiserver and is then killed with SIGKILL,
// which it cannot catch (as go test's -timeout or CI's time limit ends a
// test): its etcd and kube-apiserver must be gone shortly after.
func TestKilledTestLeavesNothingRunning(t *testing.T) {
	if os.Getenv(killedChildEnv) != "" {
		e, err := Start()
		if err != nil {
			t.Fatal(err)
		}
		etcd, api := e.env.ControlPlane.Etcd, e.env.ControlPlane.APIServer
		fmt.Printf("started %s %s\n", etcd.DataDir, api.CertDir)
		time.Sleep(time.Hour) // until the parent kills this process
		return
	}
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestKilledTestLeavesNothingRunning$", "-test.v")
	cmd.Env = append(os.Environ(), killedChildEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var dirs []string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 3 && f[0] == "started" {
			dirs = f[1:]
			break
		}
	}
	if dirs == nil {
		t.Fatalf("the child test started no control plane (scan: %v)", sc.Err())
	}
	children, err := childPIDs(cmd.Process.Pid)
	if err != nil || len(children) < 2 {
		t.Fatalf("the child's processes: %v, %v; want etcd and kube-apiserver", children, err)
	}
	go func() { _, _ = bufioDrain(sc) }()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	Eventually(t, ctx, 30*time.Second, "the killed test's etcd and kube-apiserver gone, and their directories", func(context.Context) (bool, string, error) {
		var left []string
		for name, pid := range children {
			if err := syscall.Kill(pid, 0); err == nil || errors.Is(err, syscall.EPERM) {
				left = append(left, fmt.Sprintf("%s (pid %d)", name, pid))
			}
		}
		for _, d := range dirs {
			if _, err := os.Stat(d); err == nil {
				left = append(left, d)
			}
		}
		return len(left) == 0, fmt.Sprintf("still there: %v", left), nil
	})
}

// childPIDs returns the processes whose parent is pid, by binary name.
func childPIDs(pid int) (map[string]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, e := range entries {
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		var child, ppid int
		var comm, state string
		if _, err := fmt.Sscanf(string(stat), "%d %s %s %d", &child, &comm, &state, &ppid); err != nil || ppid != pid {
			continue
		}
		out[strings.Trim(comm, "()")] = child
	}
	return out, nil
}

// bufioDrain reads what is left of a scanner's input.
func bufioDrain(sc *bufio.Scanner) (int, error) {
	n := 0
	for sc.Scan() {
		n++
	}
	return n, sc.Err()
}
