// Package placementbench measures Longhorn's stateless replica placement
// under a concurrent volume workload, 32 volumes of 100Gi at once on 4 ×
// 400Gi disks, with longhorn-manager v1.12.0's own controllers placing (in
// a sandbox, with and without the admission gate): each volume's replica is
// placed by its owner's scheduler from that longhorn-manager's own cached
// view of disk usage and written with no lock. It reports how many disks
// end over their limit, how many volumes were placed, the fullest disk and
// how long until every volume was decided.
//
// It holds only benchmarks; a sandbox starts only when -bench is given.
package placementbench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/longhorn/diskschedule/internal/conditions"
	"github.com/longhorn/diskschedule/internal/ledger"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

const (
	gi         = int64(1) << 30
	nodes      = 4
	diskSize   = 400 * gi
	volumeSize = 100 * gi
	// volumes is twice what the disks hold: 32 × 100Gi on 4 × 400Gi.
	volumes = 32
)

// TestMain keeps the in-process controllers' logs out of the figures.
func TestMain(m *testing.M) {
	flag.Parse()
	testenv.QuietBenchmarks()
	os.Exit(m.Run())
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
