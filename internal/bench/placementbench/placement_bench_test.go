// Package placementbench measures Longhorn's stateless replica placement
// under a concurrent volume workload, 32 volumes of 100Gi at once on 4 ×
// 400Gi disks: BenchmarkLonghornControllers with longhorn-manager v1.12.0's
// own controllers placing (in a sandbox, with and without the admission
// gate), BenchmarkSimulatedLonghorn with the simulated Longhorn v1.12
// (package simlonghorn), whose volume controller places each volume's
// replica with Longhorn's own scheduler from its own cached view of disk
// usage and writes the Replica with no lock. Each reports how many disks end
// over their limit, how many volumes were placed, the fullest disk and how
// long until every volume was decided.
//
// It holds only benchmarks; the test control plane starts only when -bench is
// given.
package placementbench

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/longhorn/diskschedule/internal/conditions"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/internal/simlonghorn"
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

// outcomeOf sums what is persisted on each disk (by UUID) into an outcome;
// every disk's limit is diskSize (over-provisioning 100%, nothing reserved).
func outcomeOf(persisted map[string]ledger.Persisted, seconds float64) outcome {
	o := outcome{seconds: seconds}
	for _, p := range persisted {
		bytes := p.Total()
		o.placed += len(p.Replicas)
		if bytes > diskSize {
			o.overLimit++
		}
		o.fullest = max(o.fullest, float64(bytes)*100/float64(diskSize))
	}
	return o
}

// BenchmarkSimulatedLonghorn runs the workload through the simulated
// Longhorn once per iteration and reports the disks over their limit, the
// volumes placed, the fullest disk and the seconds until every volume was
// decided.
func BenchmarkSimulatedLonghorn(b *testing.B) {
	measure(b, func() outcome {
		runs++
		return runWorkload(b, fmt.Sprintf("placementbench-%d", runs))
	})
}

// measure runs the workload b.N times with run and reports the disks over
// their limit, the volumes placed and the seconds until every volume was
// decided, per run, and the fullest disk of all runs.
func measure(b *testing.B, run func() outcome) {
	var sum outcome
	for range b.N {
		o := run()
		sum.overLimit += o.overLimit
		sum.placed += o.placed
		sum.fullest = max(sum.fullest, o.fullest)
		sum.seconds += o.seconds
	}
	n := float64(b.N)
	b.ReportMetric(float64(sum.overLimit)/n, "disks-over-limit")
	b.ReportMetric(float64(sum.placed)/n, "volumes-placed")
	b.ReportMetric(sum.fullest, "fullest-disk-%")
	b.ReportMetric(sum.seconds/n, "s-to-decided")
}

// runWorkload starts the simulated Longhorn on fresh nodes in namespace ns,
// creates every volume at once, waits until each is Scheduled=True or
// Scheduled=False for lack of space, and returns what the replicas hold.
func runWorkload(b *testing.B, ns string) outcome {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := env.CreateNamespace(ctx, ns); err != nil {
		b.Fatal(err)
	}
	var specs []simlonghorn.NodeSpec
	var nodeNames []string
	for i := range nodes {
		name := fmt.Sprintf("%s-n%d", ns, i)
		nodeNames = append(nodeNames, name)
		specs = append(specs, simlonghorn.NodeSpec{Name: name, Disks: []simlonghorn.DiskSpec{{Name: "disk-1", Size: diskSize}}})
	}
	stop := startSim(b, ns, specs)
	defer stop()
	waitNodes(ctx, b, ns, nodeNames)

	start := time.Now()
	var wg sync.WaitGroup
	for v := range volumes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := env.Client.Create(ctx, volume(ns, fmt.Sprintf("vol-%02d", v))); err != nil {
				b.Error(err)
			}
		}()
	}
	wg.Wait()
	if err := waitDecided(ctx, env.Client, ns); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start).Seconds()

	persisted, err := testenv.PersistedByDisk(ctx, env.Client, ns, nil)
	if err != nil {
		b.Fatal(err)
	}
	return outcomeOf(persisted, elapsed)
}

// waitDecided waits until every volume in ns is Scheduled=True, or
// Scheduled=False for lack of space.
func waitDecided(ctx context.Context, c client.Client, ns string) error {
	_, err := testenv.Poll(ctx, 3*time.Minute, func(ctx context.Context) (bool, string, error) {
		list := &lhv1.VolumeList{}
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false, "", err
		}
		decided := 0
		for _, v := range list.Items {
			c, _ := conditions.Longhorn(v.Status.Conditions, lhv1.VolumeConditionTypeScheduled)
			if c.Status == lhv1.ConditionStatusTrue || c.Reason == lhv1.VolumeConditionReasonReplicaSchedulingFailure {
				decided++
			}
		}
		return decided == volumes, fmt.Sprintf("%d of %d volumes decided", decided, volumes), nil
	}, testenv.Every(20*time.Millisecond))
	if err != nil {
		return fmt.Errorf("waiting for every volume to be decided: %w", err)
	}
	return nil
}

// startSim runs the simulated Longhorn for namespace ns in its own manager
// and returns the function that stops it.
func startSim(b *testing.B, ns string, specs []simlonghorn.NodeSpec) func() {
	b.Helper()
	mgr, err := simlonghorn.NewManager(env.Config, env.Scheme, simlonghorn.Options{Namespace: ns, Nodes: specs, PlaceReplicas: true})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("the simulated Longhorn stopped with %v", err)
		}
	}
}

// waitNodes waits until every Longhorn node reports its disk schedulable.
func waitNodes(ctx context.Context, b *testing.B, ns string, names []string) {
	b.Helper()
	testenv.Eventually(b, ctx, time.Minute, "every Longhorn node reports its disk schedulable", func(ctx context.Context) (bool, string, error) {
		for _, name := range names {
			n := &lhv1.Node{}
			if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, n); err != nil {
				return false, name + " not found", client.IgnoreNotFound(err)
			}
			st := n.Status.DiskStatus["disk-1"]
			if st == nil || st.StorageMaximum != diskSize || !conditions.LonghornTrue(st.Conditions, lhv1.DiskConditionTypeSchedulable) {
				return false, name + "'s disk-1 is not schedulable yet", nil
			}
		}
		return true, "", nil
	})
}

// volume returns a one-replica volume of volumeSize named pvc-<name>, as
// Longhorn's CSI driver creates it.
func volume(ns, name string) *lhv1.Volume {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "bench", UID: types.UID(name)},
		Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(volumeSize, resource.BinarySI)}}},
	}
	class := &storagev1.StorageClass{Parameters: map[string]string{simlonghorn.ParamNumberOfReplicas: "1"}}
	v, err := simlonghorn.VolumeFor(pvc, class, ns)
	if err != nil {
		panic(err) // the claim above always requests storage
	}
	return v
}
