package ledgerbench

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	longhornv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/ledgerclient"
	"github.com/longhorn/diskschedule/internal/manager"
	"github.com/longhorn/diskschedule/internal/requirement"
	"github.com/longhorn/diskschedule/test/framework/managertest"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

// BenchmarkLedgerBytesPerEntry measures what one replica entry costs a
// DiskSchedule as the API server stores it: its request in spec (written
// one key at a time with ledgerclient, as the gate and the mirror write),
// its decision in status (written by the manager's DiskSchedule
// controller) and what both add to metadata.managedFields. Replica names
// are shaped as Longhorn names them (pvc-<uuid>-r-<8 hex>). It reports
// bytes per entry of each part, measured on the JSON the API server returns,
// for ledgers of 100 and 300 entries (the difference with an empty
// ledger, divided by the entries). Run it with -benchtime=1x: each size
// fills a new ledger.
func BenchmarkLedgerBytesPerEntry(b *testing.B) {
	if env == nil {
		b.Skip("the test control plane starts only with -bench")
	}
	for _, n := range []int{100, 300} {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) { measureSize(b, n) })
	}
}

// measureSize fills a new ledger with n replica entries and reports what
// each costs.
func measureSize(b *testing.B, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ns := fmt.Sprintf("bench-size-%d-%d", n, time.Now().UnixNano())
	if err := env.CreateNamespace(ctx, ns); err != nil {
		b.Fatal(err)
	}
	m, err := managertest.Start(env, env.Config, manager.Options{Namespace: ns, GateGrace: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := m.Stop(); err != nil {
			b.Error(err)
		}
	}()
	node := testenv.NodeFixture{Name: ns + "-node", Disks: map[string]testenv.Disk{"disk-1": {UUID: ns + "-disk", Size: diskSize}}}
	if err := node.CreateNode(ctx, env.Client, ns); err != nil {
		b.Fatal(err)
	}
	key := client.ObjectKey{Namespace: ns, Name: ns + "-disk"}
	var empty map[string]int
	testenv.Eventually(b, ctx, time.Minute, "the node controller's DiskSchedule "+key.Name+" has its limit", func(ctx context.Context) (bool, string, error) {
		ds := &longhornv1.DiskSchedule{}
		if err := env.Client.Get(ctx, key, ds); err != nil || ds.Status.StorageLimit == 0 {
			return false, "no limit yet", client.IgnoreNotFound(err)
		}
		var err error
		empty, err = storedParts(ctx, key)
		return err == nil, "", err
	}, testenv.Every(100*time.Millisecond))

	b.ResetTimer()
	for i := range n {
		name := fmt.Sprintf("pvc-%08x-1111-2222-3333-%012x-r-%08x", i, i, i)
		if _, err := ledgerclient.Mutate(ctx, env.Client, env.Client, key, requirement.Write(requirement.Request{Kind: ledger.Replica, Name: name, Size: gi})); err != nil {
			b.Fatalf("requesting %s: %v", name, err)
		}
	}
	b.StopTimer()
	testenv.Eventually(b, ctx, 2*time.Minute, fmt.Sprintf("the %d requests are decided", n), func(ctx context.Context) (bool, string, error) {
		ds := &longhornv1.DiskSchedule{}
		if err := env.Client.Get(ctx, key, ds); err != nil {
			return false, "", err
		}
		return len(ds.Status.Replicas) == n && ds.Status.ObservedGeneration == ds.Generation,
			fmt.Sprintf("%d decided, generation %d of %d", len(ds.Status.Replicas), ds.Status.ObservedGeneration, ds.Generation), nil
	}, testenv.Every(100*time.Millisecond))
	full, err := storedParts(ctx, key)
	if err != nil {
		b.Fatal(err)
	}
	per := func(part string) float64 { return float64(full[part]-empty[part]) / float64(n) }
	for _, part := range []string{"spec", "status", "managedFields", "total"} {
		b.ReportMetric(per(part), part+"-B/entry")
	}
	fmt.Printf("%d entries: bytes per entry: spec %.0f, status %.0f, managedFields %.0f, whole object %.0f (object %d bytes)\n",
		n, per("spec"), per("status"), per("managedFields"), per("total"), full["total"])
}

// storedParts returns the JSON size of the DiskSchedule key as the API
// server returns it, whole and by part.
func storedParts(ctx context.Context, key client.ObjectKey) (map[string]int, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(longhornv1.GroupVersion.WithKind("DiskSchedule"))
	if err := env.Client.Get(ctx, key, u); err != nil {
		return nil, fmt.Errorf("reading DiskSchedule %s: %w", key.Name, err)
	}
	size := func(v any) int {
		data, _ := json.Marshal(v)
		return len(data)
	}
	meta, _ := u.Object["metadata"].(map[string]any)
	return map[string]int{
		"spec": size(u.Object["spec"]), "status": size(u.Object["status"]),
		"managedFields": size(meta["managedFields"]), "total": size(u.Object),
	}, nil
}
