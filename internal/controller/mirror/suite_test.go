package mirror_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/manager"
	"github.com/longhorn/diskschedule/test/framework/managertest"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

const gi = int64(1) << 30

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, func(e *testenv.Env) { env = e }))
}

// startManager starts the project's manager for namespace with the mirror's
// grace period, its ledger and mirror reading time from clk; the test's
// cleanup stops it.
func startManager(t *testing.T, namespace string, grace time.Duration, clk clock.PassiveClock) *testenv.RunningManager {
	t.Helper()
	m, err := managertest.Start(env, env.Config, manager.Options{Namespace: namespace, GateGrace: grace, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Stop() })
	return m
}

// ledgerTimeout bounds every wait for a ledger.
const ledgerTimeout = 30 * time.Second

// getLedger returns the DiskSchedule of the disk uuid.
func getLedger(ctx context.Context, ns, uuid string) (*dsv1.DiskSchedule, error) {
	ds := &dsv1.DiskSchedule{}
	return ds, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: uuid}, ds)
}

// settled reports whether ds has decided its current spec.
func settled(ds *dsv1.DiskSchedule) bool {
	if ds.Status.ObservedGeneration != ds.Generation {
		return false
	}
	for name, size := range ds.Spec.Replicas {
		if st, ok := ds.Status.Replicas[name]; !ok || st.RequestedSize != int64(size) {
			return false
		}
	}
	for name, size := range ds.Spec.BackingImages {
		if st, ok := ds.Status.BackingImages[name]; !ok || st.RequestedSize != int64(size) {
			return false
		}
	}
	return true
}

// createReplica creates a running Replica of volume on the disk, as Longhorn
// persists it once placed.
func createReplica(t *testing.T, ctx context.Context, ns, name, volume string, size int64, node, diskName, uuid string) *lhv1.Replica {
	t.Helper()
	r := testenv.Replica(ns, name, testenv.ReplicaFixture{Volume: volume, Size: size, NodeID: node, DiskName: diskName,
		DiskID: uuid, State: lhv1.InstanceStateRunning})
	if err := testenv.CreateLonghorn(ctx, env.Client, r); err != nil {
		t.Fatal(err)
	}
	return r
}

// mirrorPass makes the mirror plan the ledger of the disk uuid (diskName
// of node) at its clock's time, and returns the version it wrote last: it
// creates a probe replica name of 1Gi there, waits until the mirror has
// requested it, deletes it and waits until the mirror has released it.
// Each of those writes is planned from the ledger as it was then (the
// mirror patches with the resourceVersion it read) and from a cache that
// holds every Replica written before the probe (an informer delivers one
// kind's events in order): the version returned shows what the mirror made
// of everything the test wrote before, at the clock's time.
func mirrorPass(t *testing.T, ctx context.Context, ns, name, node, diskName, uuid string) *dsv1.DiskSchedule {
	t.Helper()
	probe := createReplica(t, ctx, ns, name, name+"-vol", gi, node, diskName, uuid)
	testenv.WaitLedger(t, ctx, env.Client, ns, uuid, ledgerTimeout, "the probe "+name+" requested", func(ds *dsv1.DiskSchedule) bool {
		return int64(ds.Spec.Replicas[name]) == gi
	})
	if err := deleteLonghorn(ctx, probe); err != nil {
		t.Fatal(err)
	}
	return testenv.WaitLedger(t, ctx, env.Client, ns, uuid, ledgerTimeout, "the probe "+name+" released", func(ds *dsv1.DiskSchedule) bool {
		_, found := ds.Spec.Replicas[name]
		return !found
	})
}

// createNode creates the Longhorn node ns-node with disks disk-0, disk-1, …
// of size bytes each; it returns the fixture and the disks' UUIDs
// (ns-uuid-0, …).
func createNode(t *testing.T, ctx context.Context, ns string, disks int, size int64) (testenv.NodeFixture, []string) {
	t.Helper()
	f := testenv.NodeFixture{Name: ns + "-node", Disks: map[string]testenv.Disk{}}
	uuids := make([]string, disks)
	for i := range disks {
		uuids[i] = fmt.Sprintf("%s-uuid-%d", ns, i)
		f.Disks[fmt.Sprintf("disk-%d", i)] = testenv.Disk{UUID: uuids[i], Size: size}
	}
	if err := f.CreateNode(ctx, env.Client, ns); err != nil {
		t.Fatal(err)
	}
	return f, uuids
}

// createVolume creates a Longhorn Volume of size bytes.
func createVolume(t *testing.T, ctx context.Context, ns, name string, size int64) {
	t.Helper()
	if err := testenv.CreateLonghorn(ctx, env.Client, testenv.Volume(ns, name, testenv.VolumeFixture{Size: size})); err != nil {
		t.Fatal(err)
	}
}

// deleteLonghorn deletes a Longhorn object as Longhorn does: the deletion,
// then Longhorn's own finalizer removed once its cleanup is done.
func deleteLonghorn(ctx context.Context, obj client.Object) error {
	if err := env.Client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
		return err
	}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
	return client.IgnoreNotFound(env.Client.Patch(ctx, obj, patch))
}

// updateLonghorn changes a Longhorn object's spec as Longhorn does (an
// Update with its own types), retrying on conflict.
func updateLonghorn[T client.Object](ctx context.Context, obj T, mutate func(T)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		mutate(obj)
		return env.Client.Update(ctx, obj)
	})
}

// updateLonghornStatus changes a Longhorn object's status, retrying on conflict.
func updateLonghornStatus[T client.Object](ctx context.Context, obj T, mutate func(T)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		mutate(obj)
		return env.Client.Status().Update(ctx, obj)
	})
}

// writeSpec changes a ledger's spec as a requester would, retrying on conflict.
func writeSpec(ctx context.Context, ns, uuid string, mutate func(*dsv1.DiskScheduleSpec)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ds, err := getLedger(ctx, ns, uuid)
		if err != nil {
			return err
		}
		mutate(&ds.Spec)
		return env.Client.Update(ctx, ds)
	})
}
