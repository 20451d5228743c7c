// Package e2e_test runs the Longhorn scheduler extender's test plan end to
// end: each test starts the sandbox (real etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler processes, kube-scheduler
// configured with the extender, the manager under its generated RBAC,
// longhorn-manager v1.12.0's own controllers on the simulated data plane)
// with the plan's topology, runs a scenario of
// test/framework/scenario several times, and asserts on where the pods went and
// what the ledgers granted. The tests run side by side, each in sandboxes
// of its own (go test's -parallel bounds how many at once); a test's runs
// share its sandbox one after another, each in a namespace of its own, and
// the longest are split over two sandboxes (inSandboxes).
//
// It needs the control-plane binaries of `make controlplane` (bin/k8s, or
// KUBEBUILDER_ASSETS).
package e2e_test

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

var bindThroughExtender = flag.Bool("e2e.bind", false, "Benchmarks: kube-scheduler binds the extender's pods through its /bind.")

var managerLog = flag.String("manager-log", "", "Write the in-process manager's and the sandbox's simulated cluster's logs to this file (default: discard them; Longhorn's own controllers log to longhorn-controllers.log in the sandbox's log directory).")

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	flag.Parse()
	if *managerLog == "" {
		ctrl.SetLogger(logr.Discard())
		klog.SetLogger(logr.Discard()) // client-go's leader election logs through klog
		return m.Run()
	}
	f, err := os.Create(*managerLog)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer f.Close()
	logger := zap.New(zap.WriteTo(f), zap.UseDevMode(true))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)
	return m.Run()
}
