package controlplane

import (
	"errors"
	"fmt"
	"testing"
)

// TestStartOnFreePort: a process that exits before it is healthy (its port
// taken meanwhile) is started again on another port, up to three times; any
// other failure is returned at once.
func TestStartOnFreePort(t *testing.T) {
	var ports []int
	p, port, err := StartOnFreePort(func(port int) (*Process, error) {
		ports = append(ports, port)
		if len(ports) < 3 {
			return nil, fmt.Errorf("kube-scheduler %w: exit status 1", ErrExitedEarly)
		}
		return &Process{name: "kube-scheduler"}, nil
	})
	if err != nil || p == nil || len(ports) != 3 || port != ports[2] {
		t.Fatalf("StartOnFreePort = %v, %d, %v after ports %v; want the third start's process and port", p, port, err, ports)
	}

	calls := 0
	_, _, err = StartOnFreePort(func(int) (*Process, error) {
		calls++
		return nil, errors.New("no such binary")
	})
	if err == nil || calls != 1 {
		t.Errorf("a failure other than an early exit: %v after %d starts, want it returned after one", err, calls)
	}

	calls = 0
	_, _, err = StartOnFreePort(func(int) (*Process, error) {
		calls++
		return nil, fmt.Errorf("etcd %w", ErrExitedEarly)
	})
	if !errors.Is(err, ErrExitedEarly) || calls != 3 {
		t.Errorf("always exiting early: %v after %d starts, want ErrExitedEarly after three", err, calls)
	}
}
