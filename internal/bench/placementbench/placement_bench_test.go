// Package placementbench runs one concurrent volume workload two ways in
// the same run against the same API server: the stateless path Longhorn
// takes today (each volume controller places its replica from its own cached
// view of disk usage and writes the Replica directly, with no lock) and the
// ledger path (the project's manager: placement, then a DiskSchedule request
// the ledger decides). It reports, side by side, how many disks end over
// their limit and how long until every volume is decided.
//
// It holds only benchmarks; the test control plane starts only when -bench is
// given. Figures and the command are in docs/benchmarks.md.
package placementbench

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	longhornv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/manager"
	"github.com/longhorn/diskschedule/internal/placement"
	"github.com/longhorn/diskschedule/internal/settings"
	"github.com/longhorn/diskschedule/internal/testenv"
)

const (
	gi         = int64(1) << 30
	nodes      = 4
	diskSize   = 400 * gi
	volumeSize = 100 * gi
	// volumes is twice what the disks hold: 32 × 100Gi on 4 × 400Gi.
	volumes = 32
)

var env *testenv.Env

// runs numbers the workload runs, so each gets fresh names.
var runs int

func TestMain(m *testing.M) {
	os.Exit(testenv.RunBenchmarks(m, func(e *testenv.Env) { env = e }))
}

// outcome is what one run of the workload left on the disks.
type outcome struct {
	// overLimit counts disks holding more than their limit.
	overLimit int
	// placed counts volumes given a disk.
	placed int
	// fullest is the highest usage of one disk, in percent of its limit.
	fullest float64
	// seconds is the time until every volume was decided.
	seconds float64
}

func outcomeOf(used map[string]int64, seconds float64) outcome {
	o := outcome{seconds: seconds}
	for _, bytes := range used {
		o.placed += int(bytes / volumeSize)
		if bytes > diskSize {
			o.overLimit++
		}
		o.fullest = max(o.fullest, float64(bytes)*100/float64(diskSize))
	}
	return o
}

// BenchmarkStatelessVersusLedger runs the workload through both paths once
// per iteration and reports, for each, the disks over their limit, the
// volumes placed, the fullest disk and the seconds until every volume was
// decided.
func BenchmarkStatelessVersusLedger(b *testing.B) {
	var stateless, ledger outcome
	for range b.N {
		runs++
		s := runStateless(b, fmt.Sprintf("stateless-%d", runs))
		l := runLedger(b, fmt.Sprintf("ledger-%d", runs))
		stateless.overLimit += s.overLimit
		stateless.placed += s.placed
		stateless.fullest = max(stateless.fullest, s.fullest)
		stateless.seconds += s.seconds
		ledger.overLimit += l.overLimit
		ledger.placed += l.placed
		ledger.fullest = max(ledger.fullest, l.fullest)
		ledger.seconds += l.seconds
	}
	n := float64(b.N)
	for _, m := range []struct {
		name string
		o    outcome
	}{{"stateless", stateless}, {"ledger", ledger}} {
		b.ReportMetric(float64(m.o.overLimit)/n, m.name+"-disks-over-limit")
		b.ReportMetric(float64(m.o.placed)/n, m.name+"-volumes-placed")
		b.ReportMetric(m.o.fullest, m.name+"-fullest-disk-%")
		b.ReportMetric(m.o.seconds/n, m.name+"-s-to-decided")
	}
	b.ReportMetric(ledger.seconds/stateless.seconds, "ledger/stateless-time")
}

// setUp creates the namespace and the nodes (whose ledgers the node
// controller creates once a manager runs).
func setUp(b *testing.B, ns string) []testenv.NodeFixture {
	b.Helper()
	ctx := context.Background()
	if err := env.CreateNamespace(ctx, ns); err != nil {
		b.Fatal(err)
	}
	var out []testenv.NodeFixture
	for i := range nodes {
		f := testenv.NodeFixture{Name: fmt.Sprintf("%s-n%d", ns, i),
			Disks: map[string]testenv.Disk{"disk-1": {UUID: fmt.Sprintf("%s-d%d", ns, i), Size: diskSize}}}
		if err := f.CreateNode(ctx, env.Client, ns); err != nil {
			b.Fatal(err)
		}
		out = append(out, f)
	}
	return out
}

// runStateless places each volume's replica from a shared informer cache of
// Replicas, as Longhorn's volume controllers do, and writes the Replica with
// its placement directly. It returns the disks whose placed bytes exceed
// their limit and the seconds it took.
func runStateless(b *testing.B, ns string) outcome {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fixtures := setUp(b, ns)
	replicaCache, err := cache.New(env.Config, cache.Options{Scheme: env.Scheme, DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := replicaCache.GetInformer(ctx, &longhornv1.Replica{}); err != nil {
		b.Fatal(err)
	}
	go func() { _ = replicaCache.Start(ctx) }()
	replicaCache.WaitForCacheSync(ctx)

	start := time.Now()
	var wg sync.WaitGroup
	for v := range volumes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			vol := &longhornv1.Volume{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("vol-%02d", v), Namespace: ns},
				Spec: longhornv1.VolumeSpec{Size: *resource.NewQuantity(volumeSize, resource.BinarySI), NumberOfReplicas: 1}}
			list := &longhornv1.ReplicaList{}
			if err := replicaCache.List(ctx, list); err != nil {
				b.Error(err)
				return
			}
			used := map[string]int64{}
			for _, r := range list.Items {
				used[r.Spec.DiskID] += r.Spec.VolumeSize
			}
			res := placement.Place(placement.Request{Volume: vol, Size: volumeSize, Count: 1,
				Nodes: statelessView(fixtures, used), Settings: settings.Default()})
			if len(res.Choices) == 0 {
				return // decided: unschedulable
			}
			c := res.Choices[0]
			rep := &longhornv1.Replica{ObjectMeta: metav1.ObjectMeta{Name: vol.Name + "-r", Namespace: ns},
				Spec: longhornv1.ReplicaSpec{VolumeName: vol.Name, VolumeSize: volumeSize, NodeID: c.NodeID, DiskID: c.DiskUUID}}
			if err := env.Client.Create(ctx, rep); err != nil {
				b.Error(err)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()

	list := &longhornv1.ReplicaList{}
	if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	used := map[string]int64{}
	for _, r := range list.Items {
		used[r.Spec.DiskID] += r.Spec.VolumeSize
	}
	return outcomeOf(used, elapsed)
}

// statelessView is the nodes as a stateless volume controller sees them:
// scheduled bytes summed from its cached Replicas.
func statelessView(fixtures []testenv.NodeFixture, used map[string]int64) []placement.Node {
	var out []placement.Node
	for _, f := range fixtures {
		n := placement.Node{Name: f.Name, Ready: true, Schedulable: true, AllowScheduling: true}
		for name, d := range f.Disks {
			n.Disks = append(n.Disks, placement.Disk{Name: name, UUID: d.UUID, Path: "/var/lib/longhorn/" + name,
				Type: longhornv1.DiskTypeFilesystem, AllowScheduling: true, Schedulable: true,
				StorageMaximum: d.Size, StorageAvailable: d.Size, StorageLimit: d.Size, StorageScheduled: used[d.UUID]})
		}
		out = append(out, n)
	}
	return out
}

// runLedger creates the same volumes with the project's manager running and
// waits until each is Scheduled=True or Scheduled=False for lack of space.
func runLedger(b *testing.B, ns string) outcome {
	b.Helper()
	ctx := context.Background()
	m, err := env.StartManager(env.Config, manager.Options{Namespace: ns})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = m.Stop() }()
	setUp(b, ns)
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		list := &longhornv1.DiskScheduleList{}
		if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		ready := 0
		for _, ds := range list.Items {
			if meta.IsStatusConditionTrue(ds.Status.Conditions, longhornv1.DiskScheduleConditionReady) && ds.Status.StorageLimit > 0 {
				ready++
			}
		}
		return ready == nodes, nil
	})
	if err != nil {
		b.Fatalf("waiting for the ledgers: %v", err)
	}

	start := time.Now()
	var wg sync.WaitGroup
	for v := range volumes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			vol := &longhornv1.Volume{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("vol-%02d", v), Namespace: ns},
				Spec: longhornv1.VolumeSpec{Size: *resource.NewQuantity(volumeSize, resource.BinarySI), NumberOfReplicas: 1,
					DataLocality: longhornv1.DataLocalityDisabled}}
			if err := env.Client.Create(ctx, vol); err != nil {
				b.Error(err)
			}
		}()
	}
	wg.Wait()
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		list := &longhornv1.VolumeList{}
		if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		decided := 0
		for _, v := range list.Items {
			c := meta.FindStatusCondition(v.Status.Conditions, longhornv1.VolumeConditionScheduled)
			if c != nil && (c.Status == metav1.ConditionTrue || c.Reason == longhornv1.VolumeReasonReplicaSchedulingFailure) {
				decided++
			}
		}
		return decided == volumes, nil
	})
	if err != nil {
		b.Fatalf("waiting for every volume to be decided: %v", err)
	}
	elapsed := time.Since(start).Seconds()

	// Count what the replicas hold, as for the stateless path.
	list := &longhornv1.ReplicaList{}
	if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	used := map[string]int64{}
	for _, r := range list.Items {
		if r.Spec.DiskID != "" {
			used[r.Spec.DiskID] += r.Spec.VolumeSize
		}
	}
	return outcomeOf(used, elapsed)
}
