package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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
	var started string
	if s.csiSidecars, started, err = s.startCommand(ctx, "sandbox-csi", bin, args, out, ready); err != nil {
		return fmt.Errorf("waiting for the CSI sidecars to start: %w", err)
	}
	s.progress("started the CSI sidecars (pid %d): %s", s.csiSidecars.PID(), started)
	return nil
}
