package extender

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/test/framework/testenv"
)

// TestReservesOnADiskAreWrittenTogether is the group commit of Reserve
// (the plugin's PreBind, the extender's /bind): pods bound onto a disk
// while a write of its reservations is in flight go out together in the
// next write, and each binder gets its own result, its reservation held or
// refused with the numbers. The first write is held until seven more
// binders wait; meanwhile something else takes 40Gi of the 100Gi disk, so
// the second write has room for some of the seven and not for the others.
func TestReservesOnADiskAreWrittenTogether(t *testing.T) {
	var patches atomic.Int32
	firstStarted, release := make(chan struct{}), make(chan struct{})
	f := newFixtureWith(t, &interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if _, ok := obj.(*dsv1.DiskSchedule); ok && patches.Add(1) == 1 {
				close(firstStarted)
				select {
				case <-release:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	f.node("node-a", []int64{100 * gi}, nil)
	const n = 8
	var pods []*corev1.Pod
	for i := range n {
		claim, _ := f.claim(fmt.Sprintf("data-%d", i), 10*gi)
		pod := f.pod(fmt.Sprintf("p%d", i), claim)
		f.passes(pod, "node-a")
		pods = append(pods, pod)
	}
	before := f.longhornVersions()

	type result struct {
		pod  *corev1.Pod
		held []Reservation
		err  error
	}
	results := make(chan result, n)
	reserve := func(pod *corev1.Pod) {
		held, err := f.ext.Reserve(f.ctx, client.ObjectKeyFromObject(pod), pod.UID, "node-a")
		results <- result{pod: pod, held: held, err: err}
	}
	go reserve(pods[0])
	select {
	case <-firstStarted:
	case <-time.After(10 * time.Second):
		t.Fatal("the first Reserve wrote nothing")
	}
	for _, pod := range pods[1:] {
		go reserve(pod)
	}
	disk := "node-a-uuid-1"
	if _, err := testenv.Poll(f.ctx, 10*time.Second, func(context.Context) (bool, string, error) {
		waiting := f.ext.waitingBinders(disk)
		return waiting == n-1, fmt.Sprintf("%d binders wait", waiting), nil
	}, testenv.Every(5*time.Millisecond)); err != nil {
		t.Fatalf("waiting for the other binders to queue behind the first write: %v", err)
	}

	key := types.NamespacedName{Namespace: f.ns, Name: disk}
	ds := &dsv1.DiskSchedule{}
	if err := f.env.Client.Get(f.ctx, key, ds); err != nil {
		t.Fatal(err)
	}
	ds.Status.StorageScheduled += 40 * gi
	if err := f.env.Client.Status().Update(f.ctx, ds); err != nil {
		t.Fatal(err)
	}
	f.waitCached(ds)
	f.waitViewed(ds)
	close(release)

	var held, refused []string
	for range n {
		var r result
		select {
		case r = <-results:
		case <-time.After(20 * time.Second):
			t.Fatal("a Reserve did not return")
		}
		switch {
		case r.err == nil:
			if len(r.held) != 1 || r.held[0].pod != f.ns+"/"+r.pod.Name || r.held[0].size != 10*gi {
				t.Errorf("pod %s: held %+v, want its one 10Gi reservation", r.pod.Name, r.held)
			}
			held = append(held, r.pod.Name)
		case errors.Is(r.err, ErrRefused):
			if r.pod == pods[0] {
				t.Errorf("the first pod was written alone, with room: %v", r.err)
			}
			if !strings.Contains(r.err.Error(), "needs 10Gi") || !strings.Contains(r.err.Error(), "free") {
				t.Errorf("pod %s: the refusal must give the numbers: %v", r.pod.Name, r.err)
			}
			refused = append(refused, r.pod.Name)
		default:
			t.Errorf("pod %s: %v", r.pod.Name, r.err)
		}
	}
	// 100Gi less 40Gi taken leaves room for six 10Gi reservations; the
	// second write's plan counts the first's once the cache shows it.
	if len(refused) < 1 || len(refused) > 2 || len(held)+len(refused) != n {
		t.Errorf("held %v, refused %v: want 5 or 6 of the 7 late pods held and the rest refused", held, refused)
	}
	if got := patches.Load(); got != 2 {
		t.Errorf("the disk's reservations went out in %d writes, want 2 (the first pod's, then the seven that waited)", got)
	}
	batches := &dto.Metric{}
	if err := f.metrics.ReservationBatch.Write(batches); err != nil {
		t.Fatal(err)
	}
	if c, s := batches.Histogram.GetSampleCount(), batches.Histogram.GetSampleSum(); c != 2 || s != n {
		t.Errorf("reservation batches: %d writes for %v pods, want 2 for %d", c, s, n)
	}

	if err := f.env.Client.Get(f.ctx, key, ds); err != nil {
		t.Fatal(err)
	}
	for _, name := range held {
		if !reservedFor(ds, f.ns+"/"+name) {
			t.Errorf("pod %s was told its reservation is held, the ledger's spec has none: %+v", name, ds.Spec.Reservations)
		}
	}
	for _, name := range refused {
		if reservedFor(ds, f.ns+"/"+name) {
			t.Errorf("pod %s was refused, the ledger's spec holds its reservation: %+v", name, ds.Spec.Reservations)
		}
	}
	f.assertLonghornUnchanged(before)
}

// reservedFor reports whether ds's spec holds a reservation for pod.
func reservedFor(ds *dsv1.DiskSchedule, pod string) bool {
	for _, res := range ds.Spec.Reservations {
		if res.Pod == pod {
			return true
		}
	}
	return false
}

// waitingBinders is how many binders wait for the next write of disk.
func (e *Extender) waitingBinders(disk string) int {
	e.commits.mu.Lock()
	defer e.commits.mu.Unlock()
	if g := e.commits.disks[disk]; g != nil {
		return len(g.next)
	}
	return 0
}
