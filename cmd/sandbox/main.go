// Command sandbox runs a whole diskschedule cluster on this machine: etcd,
// kube-apiserver, kube-controller-manager and kube-scheduler (with the
// diskschedule extender) as local processes, the manager in-process,
// longhorn-manager v1.12.0's own control plane in a process of their own on
// a simulated data plane, the nodes and disks of a topology file. It runs until interrupted. Run it from the
// repository's root (make sandbox).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox:", err)
		os.Exit(1)
	}
}

func run() error {
	// A flag set of its own: controller-runtime registers --kubeconfig on
	// the global one, with another meaning.
	fs := flag.NewFlagSet("sandbox", flag.ExitOnError)
	topology := fs.String("topology", "config/sandbox/topology.yaml", "The topology file describing the simulated nodes and disks.")
	kubeconfig := fs.String("kubeconfig", "bin/sandbox/kubeconfig", "Where to write an administrator's kubeconfig.")
	extender := fs.Bool("extender", true, "Register the diskschedule extender with kube-scheduler and enable it.")
	extenderBind := fs.Bool("extender-bind", false, "With --extender, kube-scheduler binds the pods the extender manages through its /bind (bindVerb), so their reservations are written before the binding.")
	gate := fs.Bool("gate", true, "Register the admission gate, so Longhorn's space-taking writes ask the ledger; false runs Longhorn as it is today.")
	simulated := fs.Bool("simulated-longhorn", true, "Run longhorn-manager v1.12.0's own control plane (one longhorn-manager per node: its volume, replica, engine, node, instance manager, attachment, eviction, rebuilding, expansion, backing image, share manager and Kubernetes controllers, its REST API and admission webhooks) on a simulated data plane (per node an instance manager answering Longhorn's gRPC API on a loopback address, and disks as filesystems of their sizes), with the cluster's CSI driver: volumes are created, placed, attached, rebuilt and expanded by Longhorn's code. false: the topology's Longhorn Nodes and disks exist and report their space, kept by longhorn-manager's own node, instance manager and Kubernetes node controllers, but nothing creates or places replicas.")
	secondary := fs.Bool("secondary-scheduler", false, "Run the second scheduler, kube-scheduler with the diskschedule plugin compiled in (bin/diskschedule-scheduler, built when stale), with the profile diskschedule-scheduler (the chart's scheduler.enabled), and tell the pod opt-in webhook it exists: pods with a Longhorn claim in namespaces labelled diskschedule.longhorn.io/extender=enabled are sent to it. It needs the gate, not the extender.")
	logDir := fs.String("log-dir", "", "Where to write the logs of etcd, kube-apiserver, kube-controller-manager, kube-scheduler, Longhorn (longhorn-manager.log, longhorn-controllers.log) and the CSI sidecars (csi-sidecars.log); default: the kubeconfig's directory.")
	configDir := fs.String("config-dir", "config", "The repository's config directory (CRDs and the deployment's RBAC).")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	if *logDir == "" {
		*logDir = filepath.Dir(*kubeconfig)
	}

	t, err := sandbox.LoadTopology(*topology)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sb, err := sandbox.Start(ctx, sandbox.Options{
		Topology: t, Extender: *extender, ExtenderBind: *extenderBind, NoGate: !*gate, LonghornNodesOnly: !*simulated, KubeconfigPath: *kubeconfig,
		ConfigDir: *configDir, LogDir: *logDir, Out: os.Stdout, SecondaryScheduler: *secondary,
	})
	if err != nil {
		return err
	}
	fmt.Printf("logs in %s; press ^C to stop\n", *logDir)
	var failure error
	select {
	case <-ctx.Done():
		fmt.Println("stopping the sandbox")
	case <-sb.Done():
		failure = sb.Err()
		fmt.Fprintln(os.Stderr, "sandbox:", failure, "- stopping")
	}
	if err := sb.Stop(); err != nil {
		return fmt.Errorf("stopping: %w", err)
	}
	fmt.Println("sandbox stopped")
	return failure
}
