package dataplane_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/longhorn/diskschedule/internal/dataplane"
	"github.com/longhorn/diskschedule/internal/testenv"
)

// systemNamespace holds the longhorn.io objects of these tests.
const systemNamespace = "dataplane-system"

// simulatedNodes are the nodes whose kubelet the data plane plays here.
var simulatedNodes = []string{"dp-node-1", "dp-node-2"}

var env *testenv.Env

// TestMain starts a control plane and the data plane alone: no manager, no
// kube-scheduler. The tests play their parts (binding pods, granting
// ledgers) and check what the data plane does in response.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if env, err = testenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	if err := env.CreateNamespace(context.Background(), systemNamespace); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := dataplane.Setup(mgr, dataplane.Options{Namespace: systemNamespace, Nodes: simulatedNodes}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	return m.Run()
}

// eventually waits up to 30 seconds for check, failing the test with the
// last state check reported.
func eventually(t *testing.T, what string, check func(ctx context.Context) (done bool, state string, err error)) {
	t.Helper()
	var state string
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		done, s, err := check(ctx)
		state = s
		return done, err
	})
	if err != nil {
		t.Fatalf("waiting until %s: %v; last: %s", what, err, state)
	}
}
