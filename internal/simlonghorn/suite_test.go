package simlonghorn_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/longhorn/diskschedule/internal/controlplane"
	"github.com/longhorn/diskschedule/internal/simlonghorn"
	"github.com/longhorn/diskschedule/internal/testenv"
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
func startSim(t *testing.T, opts simlonghorn.Options) {
	t.Helper()
	mgr, err := simlonghorn.NewManager(env.Config, env.Scheme, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the simulated Longhorn stopped with %v", err)
		}
	})
}

// startVolumeControllers starts kube-controller-manager's volume
// controllers (PV binder, expander, PV and claim protection) for the
// suite, unless they run already; TestMain's control plane stops them.
func startVolumeControllers(t *testing.T) {
	t.Helper()
	if err := env.StartControllerManager(context.Background(), controlplane.VolumeControllers()...); err != nil {
		t.Fatalf("starting kube-controller-manager: %v", err)
	}
}

// nodeName returns the name of a test node, unique to the namespace.
func nodeName(ns, n string) string { return ns + "-" + n }

// disk returns a disk spec of size GiB.
func disk(name string, sizeGi int64) simlonghorn.DiskSpec {
	return simlonghorn.DiskSpec{Name: name, UUID: "", Size: sizeGi * gi}
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

// volumeSpec returns the Longhorn Volume the CSI driver would create for a
// claim of size GiB with the class parameters, named name.
func newVolume(t *testing.T, ns, name string, sizeGi int64, params map[string]string) *lhv1.Volume {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "app", UID: types.UID(name)},
		Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(sizeGi*gi, resource.BinarySI)}}},
	}
	v, err := simlonghorn.VolumeFor(pvc, &storagev1.StorageClass{Parameters: params}, ns)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// replicasOf lists the replicas of a volume from the API server.
func replicasOf(ctx context.Context, ns, volume string) ([]lhv1.Replica, error) {
	list := &lhv1.ReplicaList{}
	if err := env.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{simlonghorn.LabelVolume: volume}); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// scheduledReplicas waits until the volume has n replicas, all scheduled,
// and returns them.
func scheduledReplicas(t *testing.T, ns, volume string, n int) []lhv1.Replica {
	t.Helper()
	return scheduledReplicasWithin(t, ns, volume, n, 30*time.Second)
}

// scheduledReplicasWithin is scheduledReplicas with its own timeout.
func scheduledReplicasWithin(t *testing.T, ns, volume string, n int, timeout time.Duration) []lhv1.Replica {
	t.Helper()
	var out []lhv1.Replica
	testenv.Eventually(t, t.Context(), timeout, fmt.Sprintf("%d scheduled replicas of %s", n, volume), func(ctx context.Context) (bool, string, error) {
		rs, err := replicasOf(ctx, ns, volume)
		if err != nil {
			return false, err.Error(), nil
		}
		scheduled := 0
		for _, r := range rs {
			if r.Spec.NodeID != "" && r.Spec.DiskID != "" {
				scheduled++
			}
		}
		out = rs
		return len(rs) == n && scheduled == n, fmt.Sprintf("%d replicas, %d scheduled", len(rs), scheduled), nil
	})
	return out
}

// assertRoundTrip fails unless obj, read back from the API server as JSON,
// holds every field Longhorn's Go type writes with the same value: Longhorn's
// CRD pruned nothing the simulated Longhorn wrote. strings lists JSON paths
// (dot-separated) that must be JSON strings.
func assertRoundTrip(t *testing.T, obj client.Object, stringPaths ...string) {
	t.Helper()
	ctx := context.Background()
	gvk, err := env.Client.GroupVersionKindFor(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	// The simulation keeps writing the object: compare two reads of the
	// same resourceVersion.
	for attempt := 0; ; attempt++ {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Fatal(err)
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), u); err != nil {
			t.Fatal(err)
		}
		if u.GetResourceVersion() == obj.GetResourceVersion() || attempt == 50 {
			break
		}
	}
	want, got := jsonMap(t, obj), jsonMap(t, u.Object)
	for _, part := range []string{"spec", "status"} {
		if w, ok := want[part]; ok && !reflect.DeepEqual(w, got[part]) {
			t.Errorf("%s %s: the API server holds\n%v\nbut Longhorn's type writes\n%v", gvk.Kind, part, got[part], w)
		}
	}
	for _, path := range stringPaths {
		v, found, err := unstructured.NestedFieldNoCopy(u.Object, strings.Split(path, ".")...)
		if err != nil || !found {
			t.Errorf("%s: %s not found (%v)", gvk.Kind, path, err)
			continue
		}
		if _, ok := v.(string); !ok {
			t.Errorf("%s: %s is %T %v, want a JSON string", gvk.Kind, path, v, v)
		}
	}
}

// jsonMap returns v as a generic JSON object with null values removed (the
// API server drops nulls of fields that are not nullable).
func jsonMap(t *testing.T, v any) map[string]any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	dropNulls(out)
	return out
}

// dropNulls removes null values from JSON objects, recursively.
func dropNulls(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if e == nil {
				delete(x, k)
				continue
			}
			dropNulls(e)
		}
	case []any:
		for _, e := range x {
			dropNulls(e)
		}
	}
}
