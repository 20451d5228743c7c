package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Process is a process the sandbox runs.
type Process struct {
	// Name is the binary's name: etcd, kube-apiserver or kube-scheduler.
	Name string
	// PID is the process ID.
	PID int
}

// findChild returns the PID of this process's child running the binary
// named name whose command line contains every one of args. envtest does not
// expose the PIDs of etcd and kube-apiserver, so they are looked up in /proc.
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

// ProcessAlive reports whether a process with the given PID exists (a
// zombie, exited but not yet waited for, counts as alive).
func ProcessAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// PortFree reports whether nothing listens on 127.0.0.1:port.
func PortFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}
