package extender

import (
	"fmt"
	"testing"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/longhorn/diskschedule/internal/extender/packing"
	"github.com/longhorn/diskschedule/internal/metrics"
	"github.com/longhorn/diskschedule/internal/settings"
)

// BenchmarkEvaluateAll is the filter's decision without HTTP or an API
// server, every node a candidate: a pod with claims new best-effort
// volumes of three replicas against 1000 nodes of four disks
// (extenderbench's and scalebench's shape), and a pod with one new
// best-effort volume of one replica against 100 nodes of one disk
// (schedulerbench's shape). See docs/benchmarks.md for the filter over
// HTTP.
func BenchmarkEvaluateAll(b *testing.B) {
	for _, tc := range []struct {
		name                           string
		nodes, disks, claims, replicas int
		diskSize, claimSize            int64
	}{
		{name: "claims=1", nodes: 1000, disks: 4, claims: 1, replicas: 3, diskSize: 400 * gi, claimSize: 100 * gi},
		{name: "claims=4", nodes: 1000, disks: 4, claims: 4, replicas: 3, diskSize: 400 * gi, claimSize: 100 * gi},
		{name: "nodes=100,disks=1,claims=1,replicas=1", nodes: 100, disks: 1, claims: 1, replicas: 1, diskSize: 10240 * gi, claimSize: gi},
	} {
		b.Run(tc.name, func(b *testing.B) {
			f := newFlight(clocktesting.NewFakeClock(metav1.Now().Time), metrics.NewExtender(prometheus.NewRegistry()))
			names := make([]string, tc.nodes)
			sizes := make([]int64, tc.disks)
			for i := range sizes {
				sizes[i] = tc.diskSize
			}
			for i := range names {
				names[i] = fmt.Sprintf("node-%04d", i)
				n, ledgers := testNode(names[i], sizes, nil)
				f.nodeEvent(n, false)
				for _, ds := range ledgers {
					f.ledgerEvent(ds, false, nil)
				}
			}
			vols := make([]podVolume, tc.claims)
			for i := range vols {
				vols[i] = podVolume{Name: fmt.Sprintf("pvc-%d", i), Size: tc.claimSize, ReplicaNodes: map[string]bool{},
					kind: kind{DataLocality: lhv1.DataLocalityBestEffort, NumberOfReplicas: tc.replicas}}
				vols[i].memoize()
			}
			q := question{pod: "ns/p", vols: vols, candidates: names, sched: settings.Default(),
				how: withOverlay | withRoomElsewhere, budget: packing.DefaultBudget}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				fits := evaluate(f.snapshot(""), q)
				if !fits[names[0]].OK {
					b.Fatalf("node %s: %s", names[0], fits[names[0]].Reason)
				}
			}
		})
	}
}
