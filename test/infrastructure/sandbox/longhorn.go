package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/longhorn/diskschedule/test/infrastructure/controlplane"
	"github.com/longhorn/diskschedule/test/infrastructure/dataplane"
	"github.com/longhorn/diskschedule/test/infrastructure/simcluster"
)

// longhornCommand is the package of the command that runs longhorn-manager's
// own control plane (cmd/sandbox-longhorn); it runs as a process of its own.
const longhornCommand = "github.com/longhorn/diskschedule/cmd/sandbox-longhorn"

// startLonghornControllers builds and starts sandbox-longhorn: Longhorn's
// own admission webhooks and one longhorn-manager per node running
// Longhorn's controllers on the simulated data plane (with
// LonghornNodesOnly, --nodes-only: its node, instance manager and
// Kubernetes node controllers alone), and otherwise Longhorn's CSI
// controller server on s.longhornCSI. It returns once the webhooks are
// registered, the controllers started and the CSI server listens.
func (s *Sandbox) startLonghornControllers(ctx context.Context) error {
	bin := s.opts.LonghornBinary
	if bin == "" {
		var err error
		if bin, err = s.build(ctx, "sandbox-longhorn", longhornCommand, "longhorn-manager v1.12.0's controllers; the first build takes minutes"); err != nil {
			return err
		}
	}
	kubeconfig := filepath.Join(s.workDir, "longhorn-manager.kubeconfig")
	if err := os.WriteFile(kubeconfig, s.adminKubeconfig, 0o600); err != nil {
		return fmt.Errorf("writing longhorn-manager's kubeconfig: %w", err)
	}
	ready := filepath.Join(s.workDir, "longhorn-manager.ready")
	s.longhornUsable = filepath.Join(s.workDir, "longhorn-manager.usable")
	out, err := s.logFile("longhorn-controllers.log")
	if err != nil {
		return err
	}
	nodes := make([]string, 0, len(s.opts.Topology.Nodes))
	for _, n := range s.opts.Topology.Nodes {
		nodes = append(nodes, n.Name)
	}
	plan := filepath.Join(s.workDir, "data-plane.json")
	if err := s.dataPlane.Write(plan); err != nil {
		return err
	}
	s.longhornControl = filepath.Join(s.workDir, "longhorn-control.sock")
	args := []string{"--kubeconfig", kubeconfig, "--namespace", Namespace, "--nodes", strings.Join(nodes, ","), "--ready-file", ready, "--usable-file", s.longhornUsable,
		"--engine-image", simcluster.EngineImage, "--instance-manager-image", simcluster.InstanceManagerImage, "--data-plane", plan,
		"--control-socket", s.longhornControl}
	if s.opts.LonghornNodesOnly {
		args = append(args, "--nodes-only")
	} else {
		args = append(args, "--csi-socket", s.longhornCSI)
	}
	// Its own mount namespace holds the data plane's disks.
	var started string
	if s.longhorn, started, err = s.startCommand(ctx, "sandbox-longhorn", bin, args, out, ready, controlplane.OwnMountNamespace()); err != nil {
		return fmt.Errorf("waiting for longhorn-manager's controllers to start: %w", err)
	}
	s.progress("started longhorn-manager v1.12.0's own control plane (pid %d): %s", s.longhorn.PID(), started)
	return nil
}

// startCommand starts the sandbox's command bin (name) with args, its
// output going to out, tracks it, and waits until it writes the file ready,
// whose content it returns trimmed; once started, the command exiting
// fails the sandbox. An exit before it is ready is returned with its last
// output. The process is returned whenever it started, also with an
// error, for Stop to stop it.
func (s *Sandbox) startCommand(ctx context.Context, name, bin string, args []string, out io.Writer, ready string, opts ...controlplane.ProcessOption) (*controlplane.Process, string, error) {
	last := &tail{max: 4096}
	p, err := controlplane.StartProcess(name, bin, args, io.MultiWriter(out, last), opts...)
	if err != nil {
		return nil, "", err
	}
	if err := s.track(Process{Name: name, PID: p.PID()}); err != nil {
		return p, "", err
	}
	var started []byte
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, s.opts.ReadyTimeout, true, func(context.Context) (bool, error) {
		select {
		case <-p.Done():
			return false, fmt.Errorf("%s exited: %v; its last output:\n%s", name, p.Err(), last)
		default:
		}
		var err error
		started, err = os.ReadFile(ready)
		return err == nil, nil
	})
	if err != nil {
		return p, "", err
	}
	go func() {
		<-p.Done()
		s.fail(fmt.Errorf("%s exited: %v", name, p.Err()))
	}()
	return p, strings.TrimSpace(string(started)), nil
}

// build builds the command pkg into bin/name of the project's module and
// returns its path, reporting progress (what it is).
func (s *Sandbox) build(ctx context.Context, name, pkg, what string) (string, error) {
	root := filepath.Dir(s.opts.ConfigDir)
	bin := filepath.Join(root, "bin", name)
	s.progress("building %s (%s)", bin, what)
	start := time.Now()
	if err := buildLocked(ctx, root, bin, pkg); err != nil {
		return "", err
	}
	s.progress("built %s in %s", bin, time.Since(start).Round(100*time.Millisecond))
	return bin, nil
}

// buildLocked builds pkg into bin from the module at root, one build at a
// time across processes (test packages run side by side): go build leaves
// an up-to-date binary as it is, so only the first start pays.
func buildLocked(ctx context.Context, root, bin, pkg string) error {
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return fmt.Errorf("building %s: %w", pkg, err)
	}
	lock, err := os.OpenFile(bin+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("building %s: %w", pkg, err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("building %s: locking %s: %w", pkg, lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing the file unlocks it too
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s: %w\n%s", pkg, err, out)
	}
	return nil
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// waitLonghornUsable waits until Longhorn's webhooks see the default engine
// image deployed (the simulated cluster creates it), so that Longhorn
// accepts new volumes.
func (s *Sandbox) waitLonghornUsable(ctx context.Context) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, s.opts.ReadyTimeout, true, func(context.Context) (bool, error) {
		_, err := os.Stat(s.longhornUsable)
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for Longhorn to see its engine image deployed: %w", err)
	}
	return nil
}

// newDataPlane lays out the simulated data plane of topology: each node an
// address of its own on loopback (127.a.b.n, a and b drawn at random so
// that sandboxes running side by side do not meet), where its instance
// manager serves and its pods run, and each disk a filesystem of its size
// at the path its Longhorn Node gives it, with the topology's disk UUID.
func newDataPlane(topology *Topology) (*dataplane.Plan, error) {
	if len(topology.Nodes) > 254 {
		return nil, fmt.Errorf("the simulated data plane has addresses for 254 nodes, not %d", len(topology.Nodes))
	}
	a, b := 100+rand.IntN(100), rand.IntN(256)
	plan := &dataplane.Plan{DiskRoot: simcluster.DiskRoot}
	for i, n := range topology.Nodes {
		node := dataplane.Node{Name: n.Name, IP: fmt.Sprintf("127.%d.%d.%d", a, b, i+1)}
		for _, d := range n.Disks {
			node.Disks = append(node.Disks, dataplane.Disk{
				Name: d.Name, UUID: DiskUUID(n.Name, d.Name), Path: simcluster.DiskPath(n.Name, d.Name), Size: d.Size,
			})
		}
		plan.Nodes = append(plan.Nodes, node)
	}
	return plan, nil
}

// DataPlane returns the simulated data plane Longhorn's controllers reach:
// each node's address and disks.
func (s *Sandbox) DataPlane() *dataplane.Plan { return s.dataPlane }

// StopNode takes node down as a node dies: its kubelet stops (no Lease renewal, no
// node or pod status: simcluster.Outages), its instance manager stops
// answering (its ports refuse connections, and the engines of the other
// nodes find the replicas it ran in error: dataplane.Listeners.Stop) and
// its longhorn-manager stops (sandbox-longhorn's control socket). Nothing
// is written to the API server: kube-controller-manager's node lifecycle
// controller marks the node NotReady once NodeMonitorGracePeriod passed
// without a Lease renewal, and Longhorn's controllers on the other nodes
// react as they do to a node that died. Longhorn's webhooks and REST API
// keep serving. The node stays down until the sandbox stops; stopping it
// again does nothing more. It returns once the node is down.
func (s *Sandbox) StopNode(ctx context.Context, node string) error {
	if !slices.ContainsFunc(s.opts.Topology.Nodes, func(n Node) bool { return n.Name == node }) {
		return fmt.Errorf("no node %s in the topology", node)
	}
	s.outages.Stop(node)
	code, body, err := s.control(ctx, "/nodes/"+url.PathEscape(node)+"/stop")
	if err != nil {
		return fmt.Errorf("taking node %s down in sandbox-longhorn: %w", node, err)
	}
	if code != http.StatusOK {
		return fmt.Errorf("taking node %s down in sandbox-longhorn: HTTP %d: %s", node, code, strings.TrimSpace(string(body)))
	}
	s.progress("node %s is down: its kubelet, instance manager and longhorn-manager stopped", node)
	return nil
}

// DiskBytes returns what each disk of the sandbox's data plane holds: the
// bytes the replicas on it were written (dataplane.DiskBytes, by the
// disk's path: DataPlane maps paths to nodes and disks).
func (s *Sandbox) DiskBytes(ctx context.Context) ([]dataplane.DiskBytes, error) {
	code, body, err := s.controlMethod(ctx, http.MethodGet, "/disks")
	if err != nil {
		return nil, fmt.Errorf("reading the disks' bytes: %w", err)
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("reading the disks' bytes: HTTP %d: %s", code, strings.TrimSpace(string(body)))
	}
	var out []dataplane.DiskBytes
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("reading the disks' bytes from %q: %w", body, err)
	}
	return out, nil
}

// control posts to sandbox-longhorn's control socket and returns the
// answer's status code and body (at most 64 KiB).
func (s *Sandbox) control(ctx context.Context, path string) (int, []byte, error) {
	return s.controlMethod(ctx, http.MethodPost, path)
}

// controlMethod is control with the request's method.
func (s *Sandbox) controlMethod(ctx context.Context, method, path string) (int, []byte, error) {
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", s.longhornControl)
	}}}
	defer c.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, method, "http://sandbox-longhorn"+path, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, body, err
}

// WriteVolume writes bytes more into a Longhorn volume through its engine
// in the sandbox's data plane, as a pod's I/O does (each replica in RW
// mode takes them onto its disk; one whose disk is full fails with ENOSPC
// and its engine sets it to ERR), and returns how many bytes the volume
// holds more. It fails with an error wrapping simcluster.ErrNoSpace when
// no replica could take the write. It is the simulated kubelets'
// simcluster.VolumeWriter.
func (s *Sandbox) WriteVolume(ctx context.Context, volume string, bytes int64) (int64, error) {
	code, body, err := s.control(ctx, "/volumes/"+url.PathEscape(volume)+"/write?bytes="+strconv.FormatInt(bytes, 10))
	if err != nil {
		return 0, fmt.Errorf("writing into volume %s: %w", volume, err)
	}
	var res dataplane.WriteResult
	switch code {
	case http.StatusOK, http.StatusInsufficientStorage:
		if err := json.Unmarshal(body, &res); err != nil {
			return 0, fmt.Errorf("writing into volume %s: reading the answer %q: %w", volume, body, err)
		}
	default:
		return 0, fmt.Errorf("writing into volume %s: HTTP %d: %s", volume, code, strings.TrimSpace(string(body)))
	}
	if code == http.StatusInsufficientStorage {
		return res.Written, fmt.Errorf("writing into volume %s: every replica failed (%s): %w", volume, strings.Join(res.Failed, ", "), simcluster.ErrNoSpace)
	}
	return res.Written, nil
}
