package controlplane

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Process is a control-plane binary running as a child process.
type Process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// StartProcess starts the binary at path with args in its own process
// group (so a ^C to the caller's terminal leaves its shutdown to the
// caller), killed when the caller dies (childAttr), its output going to
// out.
func StartProcess(name, path string, args []string, out io.Writer, opts ...ProcessOption) (*Process, error) {
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = childAttr()
	for _, o := range opts {
		o(cmd.SysProcAttr)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Process{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// ProcessOption changes how StartProcess starts a process.
type ProcessOption func(*syscall.SysProcAttr)

// Name returns the process's name, as given to StartProcess.
func (p *Process) Name() string { return p.name }

// PID returns the process's ID.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err returns how the process exited, once Done is closed.
func (p *Process) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// exited reports whether the process has exited.
func (p *Process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM, waits up to grace for the process to exit, then kills
// it, and waits until it is gone. Stopping an exited process does nothing.
func (p *Process) Stop(grace time.Duration) error {
	if p.exited() {
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stopping %s: %w", p.name, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("killing %s: %w", p.name, err)
	}
	<-p.done
	return fmt.Errorf("%s did not stop within %s and was killed", p.name, grace)
}

// ErrExitedEarly says a process exited before it was healthy: most often
// because the port it was given, free when chosen, was taken meanwhile.
var ErrExitedEarly = errors.New("exited before it was healthy")

// StartOnFreePort starts a process on a free port with start, and again on
// another port, up to three times, when it exits before it is healthy:
// FreePort's port is only free until someone else binds it.
func StartOnFreePort(start func(port int) (*Process, error)) (*Process, int, error) {
	var errs []error
	for range 3 {
		port, err := FreePort()
		if err != nil {
			return nil, 0, err
		}
		p, err := start(port)
		if err == nil {
			return p, port, nil
		}
		if !errors.Is(err, ErrExitedEarly) {
			return nil, 0, err
		}
		errs = append(errs, err)
	}
	return nil, 0, errors.Join(errs...)
}

// WaitHealthy polls url (an https endpoint with a self-signed certificate,
// such as /healthz of kube-scheduler or kube-controller-manager) until it
// answers 200, the process exits, or timeout passes. On failure it stops the
// process.
func (p *Process) WaitHealthy(ctx context.Context, url string, timeout time.Duration) error {
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{
		// The components serve self-signed certificates; only their health is read.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec
	}}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if p.exited() {
			return false, fmt.Errorf("%s %w: %v", p.name, ErrExitedEarly, p.err)
		}
		return Healthy(ctx, hc, url), nil
	})
	if err != nil {
		return errors.Join(fmt.Errorf("waiting for %s at %s: %w", p.name, url, err), p.Stop(5*time.Second))
	}
	return nil
}

// Healthy reports whether GET url answers 200.
func Healthy(ctx context.Context, hc *http.Client, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// FreePort returns a TCP port that was free on 127.0.0.1 a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
