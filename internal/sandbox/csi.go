package sandbox

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/longhorn/diskschedule/internal/controlplane"
)

// csiCommand is the package of the command that runs the CSI sidecars
// (cmd/sandbox-csi); it runs as a process of its own.
const csiCommand = "github.com/longhorn/diskschedule/cmd/sandbox-csi"

// startCSISidecars builds and starts sandbox-csi: the CSI external-provisioner
// (with the storage capacity it publishes) and the external-resizer, calling
// Longhorn's CSI controller server in sandbox-longhorn on s.longhornCSI. It
// returns once they run.
func (s *Sandbox) startCSISidecars(ctx context.Context) error {
	bin, err := s.build(ctx, "sandbox-csi", csiCommand, "the CSI external-provisioner and external-resizer")
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(s.workDir, "csi-sidecars.kubeconfig")
	if err := os.WriteFile(kubeconfig, s.adminKubeconfig, 0o600); err != nil {
		return fmt.Errorf("writing the CSI sidecars' kubeconfig: %w", err)
	}
	out, err := s.logFile("csi-sidecars.log")
	if err != nil {
		return err
	}
	ready := filepath.Join(s.workDir, "csi-sidecars.ready")
	args := []string{"--kubeconfig", kubeconfig, "--namespace", Namespace, "--csi-socket", s.longhornCSI, "--ready-file", ready}
	if s.opts.CapacityPollInterval > 0 {
		args = append(args, "--capacity-poll-interval", s.opts.CapacityPollInterval.String())
	}
	last := &tail{max: 4096}
	if s.csiSidecars, err = controlplane.StartProcess("sandbox-csi", bin, args, io.MultiWriter(out, last)); err != nil {
		return err
	}
	if err := s.track(Process{Name: "sandbox-csi", PID: s.csiSidecars.PID()}); err != nil {
		return err
	}
	var started []byte
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, s.opts.ReadyTimeout, true, func(context.Context) (bool, error) {
		select {
		case <-s.csiSidecars.Done():
			return false, fmt.Errorf("sandbox-csi exited: %v; its last output:\n%s", s.csiSidecars.Err(), last)
		default:
		}
		var err error
		started, err = os.ReadFile(ready)
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the CSI sidecars to start: %w", err)
	}
	go func() {
		<-s.csiSidecars.Done()
		s.fail(fmt.Errorf("sandbox-csi exited: %v", s.csiSidecars.Err()))
	}()
	s.progress("started the CSI sidecars (pid %d): %s", s.csiSidecars.PID(), strings.TrimSpace(string(started)))
	return nil
}
