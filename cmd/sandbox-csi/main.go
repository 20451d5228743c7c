// Command sandbox-csi runs the sandbox's CSI sidecars (simcluster.CSISidecars)
// in front of Longhorn v1.12.0's own CSI controller server, which
// sandbox-longhorn serves on --csi-socket: the external-provisioner, with
// the storage capacity it publishes, and the external-resizer, until it is
// signalled. The sandbox starts it as a process of its own, as the
// csi-provisioner and csi-resizer containers run in a cluster: the
// provisioner's library registers Kubernetes' core types in client-go's
// global scheme, which nothing else in the process may read meanwhile.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/longhorn/diskschedule/internal/scheme"
	"github.com/longhorn/diskschedule/test/infrastructure/simcluster"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox-csi:", err)
		os.Exit(1)
	}
}

func run() error {
	// A flag set of its own: controller-runtime registers --kubeconfig on
	// the command line's.
	fs := flag.NewFlagSet("sandbox-csi", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "An administrator's kubeconfig of the sandbox's API server.")
	namespace := fs.String("namespace", "longhorn-system", "Longhorn's namespace.")
	csiSocket := fs.String("csi-socket", "", "The Unix socket where Longhorn's CSI Identity and Controller services serve (sandbox-longhorn's --csi-socket).")
	pollInterval := fs.Duration("capacity-poll-interval", simcluster.DefaultCapacityPollInterval, "How often the external-provisioner refreshes every CSIStorageCapacity object it publishes.")
	readyFile := fs.String("ready-file", "", "Written once the sidecars are made and start.")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	if *kubeconfig == "" || *csiSocket == "" {
		return errors.New("--kubeconfig and --csi-socket are required")
	}
	logger := zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("loading %s: %w", *kubeconfig, err)
	}
	s, err := scheme.New()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = ctrl.LoggerInto(ctx, logger)
	sidecars, err := simcluster.NewCSISidecars(ctx, cfg, s, simcluster.CSISidecarOptions{
		Namespace: *namespace, CSIEndpoint: *csiSocket, CapacityPollInterval: *pollInterval,
	})
	if err != nil {
		return err
	}
	if *readyFile != "" {
		line := fmt.Sprintf("the external-provisioner and the external-resizer of %s, started %s\n", simcluster.CSIDriver, time.Now().Format(time.RFC3339))
		if err := os.WriteFile(*readyFile, []byte(line), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", *readyFile, err)
		}
	}
	return sidecars.Run(ctx)
}
