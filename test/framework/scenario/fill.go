package scenario

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/longhorn/diskschedule/test/infrastructure/dataplane"
	"github.com/longhorn/diskschedule/test/infrastructure/simcluster"
)

// FillOptions configures Fill.
type FillOptions struct {
	// ConcurrentPVCsOptions are the claims beyond capacity Fill starts
	// from (ConcurrentPVCs: Claims claims of Size at once).
	ConcurrentPVCsOptions
	// DiskBytes reads what each disk of the data plane holds (the
	// sandbox's Sandbox.DiskBytes). Required.
	DiskBytes func(context.Context) ([]dataplane.DiskBytes, error)
	// Settle is how long the volumes are watched once every write ended,
	// for Longhorn's controllers to act on the failed replicas; zero is
	// 30 s.
	Settle time.Duration
}

// FillResult is what writing every volume full did.
type FillResult struct {
	// Claims is how the claims were placed (ConcurrentPVCs).
	Claims ConcurrentPVCsResult
	// Pods is how many pods were created, one per claim; Running how many
	// ran (their volumes attached: the others' volumes were never placed).
	Pods, Running int
	// Written counts the pods whose writes ended with every byte written,
	// WriteFailed those whose writes failed for space (no replica of the
	// volume could take them).
	Written, WriteFailed int
	// ReplicasFailed counts the replicas Longhorn's controllers marked
	// failed from the first write on.
	ReplicasFailed int
	// EverDegraded and EverFaulted count the volumes Longhorn reported
	// degraded, or faulted, at some point from the first write on.
	EverDegraded, EverFaulted int
	// Healthy, Degraded, Faulted and Unknown count the volumes' robustness
	// at the end (Unknown: detached, or never placed).
	Healthy, Degraded, Faulted, Unknown int
	// TimeToWritten is the time from the pods' creation until every
	// running pod's writes ended.
	TimeToWritten time.Duration
	// LastChange is the time from the pods' creation until a volume's
	// robustness last changed (the volumes healthy again, where they
	// can be); zero when none changed after the writes began.
	LastChange time.Duration
	// Disks are, per disk, the bytes its replicas hold at the end against
	// its size.
	Disks []DiskFill
}

// DiskFill is what one disk holds after the writes.
type DiskFill struct {
	// Node and Disk name the disk.
	Node, Disk string
	// Held is the bytes the replicas on it hold, Size its size.
	Held, Size int64
}

// Full reports whether the disk has no byte left.
func (d DiskFill) Full() bool { return d.Held >= d.Size }

// Fill places claims beyond the disks' capacity at once (ConcurrentPVCs,
// one replica each, data locality disabled), then creates a pod per claim
// that writes its volume full (simcluster.AnnotationWrite, the claim's
// size), and reports what the bytes did: each disk's bytes against its
// size, the writes that failed for space, the replicas Longhorn's
// controllers marked failed, and the volumes healthy, degraded and faulted.
// With the admission gate no disk is granted more than it holds, so every
// write lands; without it, the disks Longhorn's racing workers overfilled
// run out of bytes and the replicas on them fail. The claims and pods are
// left for Cleanup.
func Fill(ctx context.Context, c client.WithWatch, opts FillOptions) (FillResult, error) {
	var out FillResult
	if opts.DiskBytes == nil {
		return out, errors.New("fill: no way to read the disks' bytes")
	}
	if opts.Settle <= 0 {
		opts.Settle = 30 * time.Second
	}
	claims, err := ConcurrentPVCs(ctx, c, opts.ConcurrentPVCsOptions)
	out.Claims = claims
	if err != nil {
		return out, err
	}
	o, err := opts.Common.withDefaults()
	if err != nil {
		return out, err
	}
	size := opts.Size
	if size == "" {
		size = "100Gi"
	}
	w, err := newWorkload(c, o, claims.Claims, 1, size, false)
	if err != nil {
		return out, err
	}

	// Every replica and volume change is seen from before the first write.
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	hist := &fillHistory{failed: map[string]bool{}, degraded: map[string]bool{}, faulted: map[string]bool{}, robustness: map[string]lhv1.VolumeRobustness{}}
	watchErrs := make(chan error, 2)
	go func() {
		watchErrs <- observe(watchCtx, c, &lhv1.ReplicaList{}, o.SystemNamespace, func(objs objects) bool {
			hist.replicas(objs)
			return false
		})
	}()
	go func() {
		watchErrs <- observe(watchCtx, c, &lhv1.VolumeList{}, o.SystemNamespace, func(objs objects) bool {
			hist.volumes(objs)
			return false
		})
	}()

	objs := make([]client.Object, 0, len(w.names))
	for _, name := range w.names {
		pod := w.pod(name)
		pod.Annotations = map[string]string{simcluster.AnnotationWrite: w.size.String()}
		objs = append(objs, pod)
	}
	start := time.Now()
	hist.setStart(start)
	if err := createAll(ctx, c, objs); err != nil {
		return out, err
	}
	out.Pods = len(objs)
	o.Logf("created %d pods, each writing its %s volume full; waiting until every pod whose volume was placed ran and its writes ended", len(objs), w.size.String())
	err = waitAll(ctx, o.Timeout, c, []watched{
		{&corev1.PodList{}, o.Namespace},
		{&eventsv1.EventList{}, o.Namespace},
		{&corev1.PersistentVolumeClaimList{}, o.Namespace},
		{&lhv1.VolumeList{}, o.SystemNamespace},
	}, func(objs []objects) (bool, string) {
		outcomes := writeOutcomes(objs[1])
		out.Running, out.Written, out.WriteFailed = 0, 0, 0
		var waiting []string
		for _, name := range w.names {
			pod, ok := objs[0][o.Namespace+"/"+name].(*corev1.Pod)
			if !ok {
				return false, "pod " + name + " not seen"
			}
			if pod.Status.Phase == corev1.PodRunning {
				out.Running++
			}
			switch outcomes[name] {
			case simcluster.EventReasonWritten:
				out.Written++
				continue
			case simcluster.EventReasonWriteFailed:
				out.WriteFailed++
				continue
			}
			pvc, ok := objs[2][o.Namespace+"/"+w.pods[name][0]].(*corev1.PersistentVolumeClaim)
			if !ok || pvc.Spec.VolumeName == "" {
				return false, "claim of pod " + name + " not bound"
			}
			vol, ok := objs[3][o.SystemNamespace+"/"+pvc.Spec.VolumeName].(*lhv1.Volume)
			if !ok {
				return false, "volume " + pvc.Spec.VolumeName + " not found"
			}
			if scheduled, decidedOK := decided(vol); decidedOK && !scheduled {
				continue // never placed: the pod cannot run
			}
			waiting = append(waiting, name)
		}
		return len(waiting) == 0, fmt.Sprintf("%d running, %d written, %d failed for space; waiting for %s", out.Running, out.Written, out.WriteFailed, strings.Join(waiting, ", "))
	})
	if err != nil {
		return out, fmt.Errorf("fill: waiting for the writes: %w", err)
	}
	out.TimeToWritten = time.Since(start)
	o.Logf("every write ended after %s: %d pods ran, %d wrote their volumes full, %d failed for space; watching the volumes for %s", round(out.TimeToWritten), out.Running, out.Written, out.WriteFailed, opts.Settle)
	select {
	case <-ctx.Done():
		return out, ctx.Err()
	case err := <-watchErrs:
		return out, fmt.Errorf("fill: watching replicas and volumes: %w", err)
	case <-time.After(opts.Settle):
	}
	stopWatch()
	hist.result(&out)
	if out.Disks, err = diskFills(ctx, c, o.SystemNamespace, opts.DiskBytes); err != nil {
		return out, fmt.Errorf("fill: %w", err)
	}
	return out, nil
}

// writeOutcomes returns, by pod name, the reason of the Event that ended
// the pod's writes (simcluster.EventReasonWritten or WriteFailed); a
// failure wins over a success when a pod wrote several volumes.
func writeOutcomes(events objects) map[string]string {
	out := map[string]string{}
	for _, obj := range events {
		e, ok := obj.(*eventsv1.Event)
		if !ok || e.Regarding.Kind != "Pod" {
			continue
		}
		switch e.Reason {
		case simcluster.EventReasonWriteFailed:
			out[e.Regarding.Name] = e.Reason
		case simcluster.EventReasonWritten:
			if out[e.Regarding.Name] == "" {
				out[e.Regarding.Name] = e.Reason
			}
		}
	}
	return out
}

// fillHistory is what the replicas and volumes did from the pods'
// creation on, as their watches saw it.
type fillHistory struct {
	mu sync.Mutex
	// start is when the pods were created; nothing before counts.
	start time.Time
	// failed are the replicas seen failed, degraded and faulted the
	// volumes seen so, by name.
	failed, degraded, faulted map[string]bool
	// robustness is each volume's latest robustness.
	robustness map[string]lhv1.VolumeRobustness
	// lastChange is when a volume's robustness last changed after start.
	lastChange time.Time
}

func (h *fillHistory) setStart(t time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.start = t
}

func (h *fillHistory) replicas(objs objects) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.start.IsZero() {
		return
	}
	for _, obj := range objs {
		if r := obj.(*lhv1.Replica); r.Spec.FailedAt != "" {
			h.failed[r.Name] = true
		}
	}
}

func (h *fillHistory) volumes(objs objects) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, obj := range objs {
		v := obj.(*lhv1.Volume)
		if old, seen := h.robustness[v.Name]; seen && old != v.Status.Robustness && !h.start.IsZero() {
			h.lastChange = time.Now()
		}
		h.robustness[v.Name] = v.Status.Robustness
		if h.start.IsZero() {
			continue
		}
		switch v.Status.Robustness {
		case lhv1.VolumeRobustnessDegraded:
			h.degraded[v.Name] = true
		case lhv1.VolumeRobustnessFaulted:
			h.faulted[v.Name] = true
		}
	}
}

// result writes the history's counts into out.
func (h *fillHistory) result(out *FillResult) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out.ReplicasFailed, out.EverDegraded, out.EverFaulted = len(h.failed), len(h.degraded), len(h.faulted)
	for _, r := range h.robustness {
		switch r {
		case lhv1.VolumeRobustnessHealthy:
			out.Healthy++
		case lhv1.VolumeRobustnessDegraded:
			out.Degraded++
		case lhv1.VolumeRobustnessFaulted:
			out.Faulted++
		default:
			out.Unknown++
		}
	}
	if !h.lastChange.IsZero() {
		out.LastChange = h.lastChange.Sub(h.start)
	}
}

// diskFills reads what each disk holds and names the disks after their
// Longhorn Nodes, whose spec gives each disk's path.
func diskFills(ctx context.Context, c client.Client, systemNamespace string, read func(context.Context) ([]dataplane.DiskBytes, error)) ([]DiskFill, error) {
	bytes, err := read(ctx)
	if err != nil {
		return nil, err
	}
	nodes := &lhv1.NodeList{}
	if err := c.List(ctx, nodes, client.InNamespace(systemNamespace)); err != nil {
		return nil, fmt.Errorf("listing Longhorn's nodes: %w", err)
	}
	byPath := map[string]DiskFill{}
	for _, n := range nodes.Items {
		for name, d := range n.Spec.Disks {
			byPath[filepath.Clean(d.Path)] = DiskFill{Node: n.Name, Disk: name}
		}
	}
	var out []DiskFill
	for _, b := range bytes {
		f, ok := byPath[filepath.Clean(b.Path)]
		if !ok {
			continue
		}
		f.Held, f.Size = b.Held, b.Size
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b DiskFill) int { return strings.Compare(a.Node+"/"+a.Disk, b.Node+"/"+b.Disk) })
	return out, nil
}
