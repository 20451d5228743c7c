package gate_test

import (
	"context"
	"flag"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/sandbox"
	"github.com/longhorn/diskschedule/internal/testenv"
	"github.com/longhorn/diskschedule/internal/testenv/sandboxtest"
)

// longhornRaces is how many races TestLonghornRace runs each way; the
// figures in docs/benchmarks.md come from -longhorn-races=5.
var longhornRaces = flag.Int("longhorn-races", 2, "races TestLonghornRace runs with the gate and without it")

// TestLonghornRace: longhorn-manager v1.12.0's own volume, replica and
// engine controllers (one longhorn-manager per node, each with its own
// datastore, work queues and backoff) place 32 volumes of one 100Gi replica
// (data locality disabled, as Longhorn's defaults) created at once on 4 ×
// 400Gi disks: twice what fits. Without the gate Longhorn's schedulers,
// each reading its own stale view of the disks, overfill a disk in at least
// one race (Longhorn as it is today); with the gate no disk ever holds more
// than its limit, every volume ends placed or told by Longhorn that it
// cannot be (Scheduled=False), every slot that fits is used, and the ledgers
// settle on what is persisted. The stall of each volume the gate refused
// (from its first refusal until it was placed or told Scheduled=False) is
// logged, p50 and max.
func TestLonghornRace(t *testing.T) {
	for _, withGate := range []bool{false, true} {
		name := "without the gate"
		if withGate {
			name = "with the gate"
		}
		t.Run(name, func(t *testing.T) {
			overfilled := 0
			var stalls []time.Duration
			for i := range *longhornRaces {
				r := longhornRace(t, withGate, i)
				if len(r.over()) > 0 {
					overfilled++
				}
				stalls = append(stalls, r.stalls...)
			}
			p50, worst := percentiles(stalls)
			t.Logf("%s: %d of %d races overfilled a disk; %d volumes refused by the gate, stalled p50 %s, max %s",
				name, overfilled, *longhornRaces, len(stalls), p50, worst)
			if !withGate && overfilled == 0 {
				t.Errorf("without the gate no race overfilled a disk: the workload does not race")
			}
		})
	}
}

// longhornResult is one race's outcome.
type longhornResult struct {
	*run
	// stalls are, per volume the gate refused, the time from its first
	// refusal until it was placed or Longhorn reported Scheduled=False.
	stalls []time.Duration
}

// longhornRace runs one race in a sandbox of its own.
func longhornRace(t *testing.T, withGate bool, i int) longhornResult {
	t.Helper()
	const volumes, size = 32, replicaSize
	sb := sandboxtest.Start(t, sandboxtest.Options{
		Sandbox:  sandbox.Options{Topology: topology(), LonghornControllers: true, NoGate: !withGate, Managers: []sandbox.ManagerHook{withGrace}},
		KeepLogs: true,
	})
	defer func() {
		if err := sb.Stop(); err != nil {
			t.Errorf("stopping the sandbox: %v", err)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg := sb.AdminConfig()
	cfg.QPS, cfg.Burst = 500, 1000
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: sb.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	limits, names := disks(ctx, t, c)
	r := longhornResult{run: &run{limits: limits, peak: map[string]int64{}, names: names}}
	stop, err := watchReplicas(ctx, t, c, r.run)
	if err != nil {
		t.Fatal(err)
	}
	stopRefusals, err := watchRefusals(ctx, c)
	if err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	for v := range volumes {
		wg.Go(func() {
			vol := testenv.Volume(sandbox.Namespace, fmt.Sprintf("race-%d-%02d", i, v), testenv.VolumeFixture{Size: size, Replicas: 1})
			if err := c.Create(ctx, vol); err != nil {
				t.Errorf("creating volume %s: %v", vol.Name, err)
			}
		})
	}
	wg.Wait()

	// Every volume ends placed, or told by Longhorn's volume controller that
	// its replica cannot be scheduled.
	resolved := map[string]time.Time{}
	placed := 0
	testenv.Eventually(t, ctx, 4*time.Minute, "every volume placed or Scheduled=False", func(ctx context.Context) (bool, string, error) {
		vols := &lhv1.VolumeList{}
		if err := c.List(ctx, vols, client.InNamespace(sandbox.Namespace)); err != nil {
			return false, "", err
		}
		reps := &lhv1.ReplicaList{}
		if err := c.List(ctx, reps, client.InNamespace(sandbox.Namespace)); err != nil {
			return false, "", err
		}
		onDisk := map[string]bool{}
		for _, rep := range reps.Items {
			if rep.Spec.DiskID != "" {
				onDisk[rep.Spec.VolumeName] = true
			}
		}
		placed = 0
		var open []string
		for _, v := range vols.Items {
			unschedulable := false
			for _, cond := range v.Status.Conditions {
				unschedulable = unschedulable || (cond.Type == lhv1.VolumeConditionTypeScheduled && cond.Status == lhv1.ConditionStatusFalse)
			}
			switch {
			case onDisk[v.Name]:
				placed++
			case unschedulable:
			default:
				open = append(open, v.Name)
				continue
			}
			if _, ok := resolved[v.Name]; !ok {
				resolved[v.Name] = time.Now()
			}
		}
		return len(vols.Items) == volumes && len(open) == 0, fmt.Sprintf("%d volumes, %d placed, still open: %v", len(vols.Items), placed, open), nil
	}, testenv.Every(100*time.Millisecond))
	stop()
	first := stopRefusals()
	waitQuiet(ctx, t, c, r.run)
	r.placed = placed
	for vol, at := range first {
		r.stalls = append(r.stalls, resolved[vol].Sub(at))
	}
	r.denied = len(first)
	pct, disk := r.fullest()
	t.Logf("race %d %s: %d placed, %d volumes refused by the gate, fullest disk %s at %.0f%% of its limit, over: %v",
		i, map[bool]string{true: "with the gate", false: "without the gate"}[withGate], r.placed, r.denied, disk, pct, r.over())
	if withGate {
		if over := r.over(); len(over) > 0 {
			t.Errorf("with the gate, persisted bytes went over a disk's limit: %v", over)
			dumpLedgersAndReplicas(t, sb.Client())
		}
		if r.placed != 16 {
			t.Errorf("%d volumes placed, want 16: 4 disks of 400Gi hold 4 × 100Gi each", r.placed)
		}
	}
	settle(t, sb.Client())
	return r
}

// watchRefusals follows the ledgers and records, per volume, when one of
// its replica requests was first rejected; stop ends the watch and returns
// them.
func watchRefusals(ctx context.Context, c client.WithWatch) (stop func() map[string]time.Time, _ error) {
	list := &dsv1.DiskScheduleList{}
	if err := c.List(ctx, list, client.InNamespace(sandbox.Namespace)); err != nil {
		return nil, err
	}
	w, err := c.Watch(ctx, &dsv1.DiskScheduleList{}, client.InNamespace(sandbox.Namespace), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	first := map[string]time.Time{}
	// Longhorn names a volume's replicas <volume>-r-<random>.
	replicaVolume := func(name string) string {
		if i := strings.LastIndex(name, "-r-"); i > 0 {
			return name[:i]
		}
		return ""
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			ds, ok := ev.Object.(*dsv1.DiskSchedule)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			now := time.Now()
			for name, st := range ds.Status.Replicas {
				if st.State != dsv1.RequestStateRejected {
					continue
				}
				if vol := replicaVolume(name); vol != "" {
					mu.Lock()
					if _, seen := first[vol]; !seen {
						first[vol] = now
					}
					mu.Unlock()
				}
			}
		}
	}()
	return func() map[string]time.Time {
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		out := make(map[string]time.Time, len(first))
		for k, v := range first {
			out[k] = v
		}
		return out
	}, nil
}

// percentiles returns the median and the largest of ds (zero when empty).
func percentiles(ds []time.Duration) (p50, worst time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2].Round(10 * time.Millisecond), s[len(s)-1].Round(10 * time.Millisecond)
}
