package sandboxtest

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/test/framework/testenv"
	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
)

// WatchingClient is an admin client of sb that can watch, with rates high
// enough for a test that writes and polls many objects.
func WatchingClient(t testing.TB, sb *sandbox.Sandbox) client.WithWatch {
	t.Helper()
	cfg := sb.AdminConfig()
	cfg.QPS, cfg.Burst = 500, 1000
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: sb.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// CreateVolumes creates Longhorn Volumes of the given names in the
// sandbox's namespace, shaped as Longhorn's API creates them from fixture
// (its Size, Replicas, DataLocality, selectors), all at once, and returns
// when each was created. Longhorn's own volume controller then creates
// and places their replicas, attached or not.
func CreateVolumes(ctx context.Context, t testing.TB, c client.Client, names []string, fixture testenv.VolumeFixture) map[string]time.Time {
	t.Helper()
	created := map[string]time.Time{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, name := range names {
		wg.Go(func() {
			vol := testenv.Volume(sandbox.Namespace, name, fixture)
			if err := c.Create(ctx, vol); err != nil {
				t.Errorf("creating volume %s: %v", name, err)
				return
			}
			mu.Lock()
			created[name] = time.Now()
			mu.Unlock()
		})
	}
	wg.Wait()
	return created
}

// WaitDecided waits, up to within, until every volume of created is placed
// (each of its replicas has a disk) or told by Longhorn's volume
// controller that it cannot be (Scheduled=False), and returns when each
// was first seen so (polled every 100 ms) and how many were placed.
func WaitDecided(ctx context.Context, t testing.TB, c client.Client, created map[string]time.Time, within time.Duration) (map[string]time.Time, int) {
	t.Helper()
	resolved := map[string]time.Time{}
	placed := 0
	testenv.Eventually(t, ctx, within, "every volume placed or Scheduled=False", func(ctx context.Context) (bool, string, error) {
		states, err := VolumeStates(ctx, c)
		if err != nil {
			return false, "", err
		}
		placed = 0
		var open []string
		for name := range created {
			switch states[name] {
			case VolumePlaced:
				placed++
			case VolumeUnschedulable:
			default:
				open = append(open, name)
				continue
			}
			if _, ok := resolved[name]; !ok {
				resolved[name] = time.Now()
			}
		}
		sort.Strings(open)
		return len(open) == 0, fmt.Sprintf("%d placed, still open: %v", placed, open), nil
	}, testenv.Every(100*time.Millisecond))
	return resolved, placed
}

// What VolumeStates says of a volume.
const (
	// VolumePlaced: each of its replicas has a disk.
	VolumePlaced = "placed"
	// VolumeUnschedulable: Longhorn's volume controller wrote
	// Scheduled=False for it.
	VolumeUnschedulable = "unschedulable"
)

// VolumeStates says of every Volume in the sandbox's namespace whether it
// is VolumePlaced, VolumeUnschedulable, or neither ("").
func VolumeStates(ctx context.Context, c client.Client) (map[string]string, error) {
	vols := &lhv1.VolumeList{}
	if err := c.List(ctx, vols, client.InNamespace(sandbox.Namespace)); err != nil {
		return nil, err
	}
	reps := &lhv1.ReplicaList{}
	if err := c.List(ctx, reps, client.InNamespace(sandbox.Namespace)); err != nil {
		return nil, err
	}
	onDisk := map[string]int{}
	for _, rep := range reps.Items {
		if rep.Spec.DiskID != "" {
			onDisk[rep.Spec.VolumeName]++
		}
	}
	out := map[string]string{}
	for _, v := range vols.Items {
		switch {
		case onDisk[v.Name] >= v.Spec.NumberOfReplicas:
			out[v.Name] = VolumePlaced
		case Unschedulable(&v):
			out[v.Name] = VolumeUnschedulable
		default:
			out[v.Name] = ""
		}
	}
	return out, nil
}

// Unschedulable reports whether Longhorn's volume controller wrote
// Scheduled=False for v.
func Unschedulable(v *lhv1.Volume) bool {
	for _, cond := range v.Status.Conditions {
		if cond.Type == lhv1.VolumeConditionTypeScheduled && cond.Status == lhv1.ConditionStatusFalse {
			return true
		}
	}
	return false
}

// WatchRefusals follows the ledgers and records, per volume, when one of
// its replica requests was first rejected (the gate's refusal of
// Longhorn's write); stop ends the watch and returns them.
func WatchRefusals(ctx context.Context, c client.WithWatch) (stop func() map[string]time.Time, _ error) {
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

// replicaVolume is the volume of a replica named as Longhorn names them,
// <volume>-r-<random>; "" for another name.
func replicaVolume(name string) string {
	if i := strings.LastIndex(name, "-r-"); i > 0 {
		return name[:i]
	}
	return ""
}

// WatchEach watches each kind of lists in the sandbox's namespace until ctx
// ends, calling see with every object as it arrives, whether the event
// deleted it, and when it arrived; see runs on one goroutine per kind. A
// watch that ends before ctx fails the test.
func WatchEach(ctx context.Context, t testing.TB, c client.WithWatch, see func(obj runtime.Object, deleted bool, at time.Time), lists ...client.ObjectList) {
	t.Helper()
	for _, list := range lists {
		w, err := c.Watch(ctx, list, client.InNamespace(sandbox.Namespace))
		if err != nil {
			t.Fatalf("watching %T: %v", list, err)
		}
		go func() {
			<-ctx.Done()
			w.Stop()
		}()
		go func() {
			for ev := range w.ResultChan() {
				see(ev.Object, ev.Type == watch.Deleted, time.Now())
			}
			if ctx.Err() == nil {
				t.Errorf("the %T watch ended early", list)
			}
		}()
	}
}
