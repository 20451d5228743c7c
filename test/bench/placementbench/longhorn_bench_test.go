package placementbench

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/longhorn/diskschedule/test/framework/testenv"
	"github.com/longhorn/diskschedule/test/framework/testenv/sandboxtest"
	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
)

// BenchmarkLonghornControllers runs the workload with longhorn-manager
// v1.12.0's own controllers placing (a sandbox: one longhorn-manager per
// node, each with its own datastore, queues and backoff), once without the
// admission gate (Longhorn as it is today) and once with it, each
// iteration in a sandbox of its own. The disks over their limit are what
// persisted at the end (test/gate's TestLonghornRace follows every Replica
// event for the peaks).
func BenchmarkLonghornControllers(b *testing.B) {
	for _, withGate := range []bool{false, true} {
		b.Run(map[bool]string{false: "gate=off", true: "gate=on"}[withGate], func(b *testing.B) {
			measure(b, func() outcome { return runLonghornWorkload(b, withGate) })
		})
	}
}

// runLonghornWorkload creates every volume at once in a fresh sandbox whose
// volumes Longhorn's own controllers place, waits until each is decided,
// and returns what the replicas hold.
func runLonghornWorkload(b *testing.B, withGate bool) outcome {
	b.Helper()
	b.StopTimer()
	topo := &sandbox.Topology{}
	for i := 1; i <= nodes; i++ {
		topo.Nodes = append(topo.Nodes, sandbox.Node{Name: fmt.Sprintf("node-%d", i), Disks: []sandbox.Disk{{Name: "disk-1", Size: diskSize}}})
	}
	sb := sandboxtest.Start(b, sandboxtest.Options{
		Sandbox:     sandbox.Options{Topology: topo, NoGate: !withGate},
		DiscardLogs: true,
	})
	defer func() {
		if err := sb.Stop(); err != nil {
			b.Errorf("stopping the sandbox: %v", err)
		}
	}()
	c := sb.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b.StartTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for v := range volumes {
		wg.Go(func() {
			vol := testenv.Volume(sandbox.Namespace, fmt.Sprintf("vol-%02d", v), testenv.VolumeFixture{Size: volumeSize, Replicas: 1})
			if err := c.Create(ctx, vol); err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
	if err := waitDecided(ctx, c, sandbox.Namespace); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start).Seconds()
	b.StopTimer()
	persisted, err := testenv.PersistedByDisk(ctx, c, sandbox.Namespace, nil)
	if err != nil {
		b.Fatal(err)
	}
	return outcomeOf(persisted, elapsed)
}
