package sandbox

import (
	"errors"
	"net"
	"strconv"
	"syscall"
)

// Process is a process the sandbox runs.
type Process struct {
	// Name is the binary's name: etcd, kube-apiserver or kube-scheduler.
	Name string
	// PID is the process ID.
	PID int
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
