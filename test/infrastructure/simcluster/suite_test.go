package simcluster_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"k8s.io/apimachinery/pkg/types"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/longhorn/diskschedule/test/framework/testenv"
	"github.com/longhorn/diskschedule/test/infrastructure/simcluster"
)

const gi = int64(1) << 30

var env *testenv.Env

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Verbose() {
		ctrllog.SetLogger(zap.New(zap.UseDevMode(true), zap.WriteTo(os.Stderr)))
	} else {
		ctrllog.SetLogger(zap.New(zap.WriteTo(discard{})))
	}
	os.Exit(testenv.Run(m, func(e *testenv.Env) { env = e }))
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// startSim runs the simulated Longhorn with opts in its own manager until
// the test ends. Node names are prefixed with the namespace, so tests never
// share a cluster-scoped Kubernetes Node.
func startSim(t *testing.T, opts simcluster.Options) {
	t.Helper()
	mgr, err := simcluster.NewManager(env.Config, env.Scheme, opts)
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, "the simulated Longhorn", mgr.Start)
}

// runUntilCleanup runs run (what) until the test ends, then waits for it
// and reports its error.
func runUntilCleanup(t *testing.T, what string, run func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s stopped with %v", what, err)
		}
	})
}

// nodeName returns the name of a test node, unique to the namespace.
func nodeName(ns, n string) string { return ns + "-" + n }

// disk returns a disk spec without reservation or tags.
func disk(name string) simcluster.DiskSpec {
	return simcluster.DiskSpec{Name: name}
}

// getNode returns the Longhorn node.
func getNode(ctx context.Context, ns, name string) (*lhv1.Node, error) {
	n := &lhv1.Node{}
	return n, env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, n)
}

// nodesReady waits until every named Longhorn node reports Ready and
// Schedulable and each of its disks Ready and Schedulable.
func nodesReady(t *testing.T, ns string, names ...string) {
	t.Helper()
	for _, name := range names {
		testenv.Eventually(t, t.Context(), 30*time.Second, "node "+name+" ready", func(ctx context.Context) (bool, string, error) {
			n, err := getNode(ctx, ns, name)
			if err != nil {
				return false, err.Error(), nil
			}
			if !condTrue(n.Status.Conditions, lhv1.NodeConditionTypeReady) || !condTrue(n.Status.Conditions, lhv1.NodeConditionTypeSchedulable) {
				return false, fmt.Sprintf("conditions %+v", n.Status.Conditions), nil
			}
			if len(n.Status.DiskStatus) != len(n.Spec.Disks) || len(n.Spec.Disks) == 0 {
				return false, fmt.Sprintf("disk status %+v", n.Status.DiskStatus), nil
			}
			for d, st := range n.Status.DiskStatus {
				if !condTrue(st.Conditions, lhv1.DiskConditionTypeReady) || !condTrue(st.Conditions, lhv1.DiskConditionTypeSchedulable) {
					return false, fmt.Sprintf("disk %s conditions %+v", d, st.Conditions), nil
				}
			}
			return true, "", nil
		})
	}
}

// condTrue reports whether the Longhorn condition typ is True.
func condTrue(conds []lhv1.Condition, typ string) bool {
	return cond(conds, typ).Status == lhv1.ConditionStatusTrue
}

// cond returns the Longhorn condition typ, or an empty one.
func cond(conds []lhv1.Condition, typ string) lhv1.Condition {
	for _, c := range conds {
		if c.Type == typ {
			return c
		}
	}
	return lhv1.Condition{}
}
