package main

import (
	"context"
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/longhorn/diskschedule/internal/uninstall"
)

// runUninstall is `manager uninstall` (uninstall.Command) against the
// cluster of $KUBECONFIG, ~/.kube/config or the pod's own: the Helm chart's
// pre-delete hook, `make undeploy` and `make uninstall` run it.
func runUninstall(args []string) error {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading the kubeconfig: %w", err)
	}
	ctx, cancel := signalContext()
	defer cancel()
	return uninstall.Command(ctx, cfg, args, os.Stdout)
}

// signalContext ends on SIGTERM or SIGINT.
func signalContext() (context.Context, context.CancelFunc) {
	return context.WithCancel(ctrl.SetupSignalHandler())
}
