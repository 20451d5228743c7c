package schedulerbench

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/test/framework/testenv"
	"github.com/longhorn/diskschedule/test/framework/testenv/sandboxtest"
	"github.com/longhorn/diskschedule/test/infrastructure/sandbox"
)

// ledgerStates follows, from a list of every DiskSchedule on, the latest
// state each ledger shows for the reservations made for the pods of one
// namespace: by volume, the reservation's state on its disk ("" while the
// ledger has not decided it). A reservation the extender drops from the
// spec once decided keeps the last state seen.
type ledgerStates struct {
	ns string
	mu sync.Mutex
	// states is, by volume, the last state seen.
	states map[string]dsv1.ReservationState
}

// followLedgers lists every ledger and then watches them until ctx ends,
// recording the reservations of the pods of ns. It starts after a phase's
// measured window so that the watch costs the window nothing: a
// reservation written and dropped again before it is not seen.
func followLedgers(ctx context.Context, b *testing.B, c client.WithWatch, ns string) *ledgerStates {
	b.Helper()
	l := &ledgerStates{ns: ns, states: map[string]dsv1.ReservationState{}}
	list := &dsv1.DiskScheduleList{}
	if err := c.List(ctx, list, client.InNamespace(sandbox.Namespace)); err != nil {
		b.Fatal(err)
	}
	for i := range list.Items {
		l.see(&list.Items[i])
	}
	sandboxtest.WatchEach(ctx, b, c, func(obj runtime.Object, deleted bool, _ time.Time) {
		if ds, ok := obj.(*dsv1.DiskSchedule); ok && !deleted {
			l.see(ds)
		}
	}, &dsv1.DiskScheduleList{})
	return l
}

// see records the reservations of ds made for the pods of l.ns.
func (l *ledgerStates) see(ds *dsv1.DiskSchedule) {
	l.mu.Lock()
	defer l.mu.Unlock()
	prefix := l.ns + "/"
	for volume, res := range ds.Spec.Reservations {
		if !strings.HasPrefix(res.Pod, prefix) {
			continue
		}
		state := dsv1.ReservationState("")
		if st, ok := ds.Status.Reservations[volume]; ok && st.Pod == res.Pod {
			state = st.State
		}
		l.states[volume] = state
	}
	for volume, st := range ds.Status.Reservations {
		if strings.HasPrefix(st.Pod, prefix) {
			l.states[volume] = st.State
		}
	}
}

// count returns the number of reservations by state ("undecided" for
// those the ledger has not decided), and how many of volumes are still
// held (scheduled or undecided).
func (l *ledgerStates) count(volumes map[string]string) (map[string]int, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out, held := map[string]int{}, 0
	for volume := range volumes {
		state, ok := l.states[volume]
		switch {
		case !ok:
			out["not seen"]++
		case state == "":
			out["undecided"]++
			held++
		default:
			out[string(state)]++
			if state == dsv1.ReservationStateScheduled {
				held++
			}
		}
	}
	return out, held
}

// describeCounts lists counts by key, most first.
func describeCounts(counts map[string]int) string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if counts[keys[i]] != counts[keys[j]] {
			return counts[keys[i]] > counts[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, counts[k]))
	}
	return strings.Join(parts, ", ")
}

// phaseVolumes returns, for each pod of ns that has a node, its claim's
// Longhorn volume and that node: volume -> node.
func phaseVolumes(ctx context.Context, c client.Client, ns string) (map[string]string, error) {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	pvs := &corev1.PersistentVolumeList{}
	if err := c.List(ctx, pvs); err != nil {
		return nil, err
	}
	handles := map[string]string{} // claim -> Longhorn volume
	for _, pv := range pvs.Items {
		if ref := pv.Spec.ClaimRef; ref != nil && ref.Namespace == ns && pv.Spec.CSI != nil {
			handles[ref.Name] = pv.Spec.CSI.VolumeHandle
		}
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" {
			continue
		}
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim == nil {
				continue
			}
			if h, ok := handles[v.PersistentVolumeClaim.ClaimName]; ok {
				out[h] = p.Spec.NodeName
			}
		}
	}
	return out, nil
}

// placement counts where Longhorn's replicas of volumes (volume -> its
// pod's node) are: on the pod's node, elsewhere only, or on no node yet.
func placement(ctx context.Context, c client.Client, volumes map[string]string) (map[string]int, error) {
	replicas := &lhv1.ReplicaList{}
	if err := c.List(ctx, replicas, client.InNamespace(sandbox.Namespace)); err != nil {
		return nil, err
	}
	local, remote := map[string]bool{}, map[string]bool{}
	for _, r := range replicas.Items {
		node, ok := volumes[r.Spec.VolumeName]
		if !ok || r.Spec.NodeID == "" || r.DeletionTimestamp != nil {
			continue
		}
		if r.Spec.NodeID == node {
			local[r.Spec.VolumeName] = true
		} else {
			remote[r.Spec.VolumeName] = true
		}
	}
	out := map[string]int{}
	for volume := range volumes {
		switch {
		case local[volume] && remote[volume]:
			out["on the pod's node and elsewhere"]++
		case local[volume]:
			out["on the pod's node"]++
		case remote[volume]:
			out["elsewhere only"]++
		default:
			out["not placed"]++
		}
	}
	return out, nil
}

// settleLonghorn waits, for at most timeout, until every volume of the
// pods of ns has its replica on its pod's node and no reservation of
// theirs is still held by a ledger, and returns where the replicas are,
// what the ledgers decided on the reservations, and how long it waited. It
// does not fail the benchmark when they do not settle: what Longhorn did
// is reported as it is.
func settleLonghorn(ctx context.Context, b *testing.B, c client.Client, l *ledgerStates, ns string, timeout time.Duration) (placed, reservations map[string]int, waited time.Duration) {
	b.Helper()
	start := time.Now()
	state, err := testenv.Poll(ctx, timeout, func(ctx context.Context) (bool, string, error) {
		volumes, err := phaseVolumes(ctx, c, ns)
		if err != nil {
			return false, "", err
		}
		placed, err = placement(ctx, c, volumes)
		if err != nil {
			return false, "", err
		}
		var held int
		reservations, held = l.count(volumes)
		return placed["on the pod's node"] == len(volumes) && held == 0,
			fmt.Sprintf("replicas: %s; reservations: %s", describeCounts(placed), describeCounts(reservations)), nil
	}, testenv.Every(time.Second), testenv.RetryErrors())
	if err != nil {
		report(b, "%s: Longhorn's replicas and the ledgers did not settle within %s: %s (%v)", ns, timeout, state, err)
	}
	return placed, reservations, time.Since(start)
}

// describeLedgers says how large the ledgers are as the API server stores
// them: their number, the mean and largest size of one in JSON, how much
// of that is managed fields, and their entries by field; a write of a
// ledger costs kube-apiserver in proportion to its size (decoding,
// validation, field management, encoding for etcd and each watcher).
func describeLedgers(b *testing.B, ctx context.Context, c client.Client) string {
	b.Helper()
	list := &dsv1.DiskScheduleList{}
	if err := c.List(ctx, list, client.InNamespace(sandbox.Namespace)); err != nil {
		b.Fatal(err)
	}
	if len(list.Items) == 0 {
		return "none"
	}
	var total, largest, managed int
	entries := map[string]int{}
	for i := range list.Items {
		ds := &list.Items[i]
		whole, err := json.Marshal(ds)
		if err != nil {
			b.Fatal(err)
		}
		fields, err := json.Marshal(ds.ManagedFields)
		if err != nil {
			b.Fatal(err)
		}
		total += len(whole)
		managed += len(fields)
		largest = max(largest, len(whole))
		for field, n := range map[string]int{
			"spec.replicas": len(ds.Spec.Replicas), "spec.backingImages": len(ds.Spec.BackingImages),
			"spec.reservations": len(ds.Spec.Reservations), "spec.replicaVersions": len(ds.Spec.ReplicaVersions),
			"status.replicas": len(ds.Status.Replicas), "status.backingImages": len(ds.Status.BackingImages),
			"status.reservations": len(ds.Status.Reservations),
		} {
			entries[field] += n
		}
	}
	n := len(list.Items)
	var parts []string
	for _, field := range slices.Sorted(maps.Keys(entries)) {
		if entries[field] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", field, entries[field]))
		}
	}
	held := "none"
	if len(parts) > 0 {
		held = strings.Join(parts, ", ")
	}
	return fmt.Sprintf("%d, %d B in JSON on average (largest %d B, managed fields %d B on average); entries in all: %s",
		n, total/n, largest, managed/n, held)
}
