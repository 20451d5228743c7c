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
// server: a pod with claims new best-effort volumes of three replicas
// against 1000 nodes of four disks (extenderbench's and scalebench's
// shape), every node a candidate. See docs/benchmarks.md for the filter
// over HTTP.
func BenchmarkEvaluateAll(b *testing.B) {
	for _, claims := range []int{1, 4} {
		b.Run(fmt.Sprintf("claims=%d", claims), func(b *testing.B) {
			f := newFlight(clocktesting.NewFakeClock(metav1.Now().Time), metrics.NewExtender(prometheus.NewRegistry()))
			names := make([]string, 1000)
			for i := range names {
				names[i] = fmt.Sprintf("node-%04d", i)
				n, ledgers := testNode(names[i], []int64{400 * gi, 400 * gi, 400 * gi, 400 * gi}, nil)
				f.nodeEvent(n, false)
				for _, ds := range ledgers {
					f.ledgerEvent(ds, false, nil)
				}
			}
			vols := make([]podVolume, claims)
			for i := range vols {
				vols[i] = podVolume{Name: fmt.Sprintf("pvc-%d", i), Size: 100 * gi, ReplicaNodes: map[string]bool{},
					kind: kind{DataLocality: lhv1.DataLocalityBestEffort, NumberOfReplicas: 3}}
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
