package controlplane

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// EnvtestPIDs are the process IDs of a started envtest control plane.
type EnvtestPIDs struct {
	Etcd, APIServer int
}

// ReapEnvtest hands a started envtest control plane to r: its etcd and
// kube-apiserver processes (found among this process's children, as envtest
// does not expose them) and their data and certificate directories, so that
// they go with the process that started them however it ends.
func ReapEnvtest(r *Reaper, env *envtest.Environment) (EnvtestPIDs, error) {
	var pids EnvtestPIDs
	etcd, api := env.ControlPlane.Etcd, env.ControlPlane.APIServer
	for _, p := range []struct {
		name, arg string
		pid       *int
	}{
		{"etcd", "--listen-client-urls=" + etcd.URL.String(), &pids.Etcd},
		{"kube-apiserver", "--secure-port=" + api.SecureServing.Port, &pids.APIServer},
	} {
		pid, err := findChild(p.name, p.arg)
		if err != nil {
			return pids, err
		}
		if err := r.Watch(pid); err != nil {
			return pids, err
		}
		*p.pid = pid
	}
	for _, dir := range []string{etcd.DataDir, api.CertDir} {
		if err := r.RemoveDir(dir); err != nil {
			return pids, err
		}
	}
	return pids, nil
}

// findChild returns the PID of this process's child running the binary
// named name whose command line contains every one of args.
func findChild(name string, args ...string) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("listing processes: %w", err)
	}
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(cmdline) == 0 {
			continue
		}
		argv := strings.Split(string(bytes.TrimRight(cmdline, "\x00")), "\x00")
		if filepath.Base(argv[0]) != name || parentPID(pid) != self || !containsAll(argv[1:], args) {
			continue
		}
		return pid, nil
	}
	return 0, fmt.Errorf("no %s process started by this process was found", name)
}

// parentPID returns the parent of pid from /proc/<pid>/stat, or -1.
func parentPID(pid int) int {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return -1
	}
	// The command name, in parentheses, may hold spaces: read after its end.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return -1
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 2 {
		return -1
	}
	ppid, err := strconv.Atoi(fields[1])
	if err != nil {
		return -1
	}
	return ppid
}

func containsAll(argv, want []string) bool {
	for _, w := range want {
		found := false
		for _, a := range argv {
			found = found || a == w
		}
		if !found {
			return false
		}
	}
	return true
}
