package simcluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

const (
	// AnnotationWrite asks the sandbox's kubelet to write that many bytes
	// (a quantity: "30Gi") into each Longhorn volume of the pod once it
	// runs, as the pod's own I/O would.
	AnnotationWrite = "sandbox.diskschedule.longhorn.io/write"
	// AnnotationWriteRate bounds those writes to that many bytes (a
	// quantity) per second; without it they go as fast as the data plane
	// takes them.
	AnnotationWriteRate = "sandbox.diskschedule.longhorn.io/write-rate"

	// EventReasonWritten is the Normal Event on a pod whose write into a
	// volume finished: every byte asked for written, or the volume full.
	EventReasonWritten = "Written"
	// EventReasonWriteFailed is the Warning Event on a pod whose write into
	// a volume failed: no replica could take it (ENOSPC), or the annotation
	// is malformed.
	EventReasonWriteFailed = "WriteFailed"
)

// VolumeWriter writes into a Longhorn volume through its engine, as a
// pod's I/O reaches the data plane (the sandbox's data plane: dataplane.Network.Write).
type VolumeWriter interface {
	// WriteVolume writes bytes more into volume and returns how many the
	// volume holds more (less than asked at its end). It fails with an
	// error wrapping ErrNoSpace when no replica could take the write.
	WriteVolume(ctx context.Context, volume string, bytes int64) (written int64, err error)
}

// ErrNoSpace is the error a VolumeWriter wraps when no replica of the
// volume could take a write: their disks were full.
var ErrNoSpace = errors.New("no space left on device")

const (
	// writeChunk is how much one call writes when no rate is asked.
	writeChunk = 1 << 30
	// writeTick is how often a rate-bound writer writes its share.
	writeTick = 100 * time.Millisecond
	// writeRetry is how long a writer waits after a failure that may pass
	// (the volume detached meanwhile, the data plane unreachable).
	writeRetry = time.Second
)

// writers runs the writes pods' annotations ask for: one goroutine per pod
// and volume, started once the pod runs, stopped when the pod goes.
type writers struct {
	sim      *sim
	writer   VolumeWriter
	recorder events.EventRecorder
	// ctx ends with the manager; every write stops then.
	ctx context.Context

	mu sync.Mutex
	// running are the pods whose writes started, with what stops them.
	running map[types.NamespacedName]startedWrites
}

// startedWrites are the writes started for one pod.
type startedWrites struct {
	uid    types.UID
	cancel context.CancelFunc
}

// newWriters returns the writers of mgr's pods, writing through writer
// (nil: pods' writes are not simulated), stopped with mgr.
func newWriters(mgr ctrl.Manager, s *sim, writer VolumeWriter) (*writers, error) {
	ctx, cancel := context.WithCancel(context.Background())
	w := &writers{sim: s, writer: writer, recorder: mgr.GetEventRecorder("sandbox-kubelet"), ctx: ctx, running: map[types.NamespacedName]startedWrites{}}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		cancel()
		return nil
	})); err != nil {
		cancel()
		return nil, fmt.Errorf("adding the pods' writers: %w", err)
	}
	return w, nil
}

// writeSpec reads what a pod's annotations ask to write: the bytes per
// volume and the rate (0: no bound); ok is false when nothing is asked.
func writeSpec(pod *corev1.Pod) (bytes, rate int64, ok bool, err error) {
	v, ok := pod.Annotations[AnnotationWrite]
	if !ok {
		return 0, 0, false, nil
	}
	q, err := resource.ParseQuantity(v)
	if err != nil || q.Sign() < 0 {
		return 0, 0, true, fmt.Errorf("annotation %s=%q: want a quantity of bytes, 0 or more", AnnotationWrite, v)
	}
	if v, set := pod.Annotations[AnnotationWriteRate]; set {
		r, err := resource.ParseQuantity(v)
		if err != nil || r.Sign() <= 0 {
			return 0, 0, true, fmt.Errorf("annotation %s=%q: want a positive quantity of bytes per second", AnnotationWriteRate, v)
		}
		rate = r.Value()
	}
	return q.Value(), rate, true, nil
}

// start starts the writes a running pod's annotations ask for, once per
// pod, into each of its Longhorn volumes (volumes resolves them).
func (w *writers) start(ctx context.Context, pod *corev1.Pod, volumes func(context.Context, *corev1.Pod) ([]string, error)) error {
	if w == nil || w.writer == nil {
		return nil
	}
	bytes, rate, ok, specErr := writeSpec(pod)
	if !ok {
		return nil
	}
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	w.mu.Lock()
	started, ok := w.running[key]
	w.mu.Unlock()
	if ok && started.uid == pod.UID {
		return nil
	}
	var names []string
	if specErr == nil {
		var err error
		if names, err = volumes(ctx, pod); err != nil {
			return err
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if started, ok := w.running[key]; ok {
		if started.uid == pod.UID {
			return nil
		}
		started.cancel()
	}
	writeCtx, cancel := context.WithCancel(w.ctx)
	w.running[key] = startedWrites{uid: pod.UID, cancel: cancel}
	if specErr != nil {
		w.recorder.Eventf(pod, nil, corev1.EventTypeWarning, EventReasonWriteFailed, "Write", "%s", specErr.Error())
		return nil
	}
	for _, v := range names {
		go w.write(writeCtx, pod.DeepCopy(), v, bytes, rate)
	}
	return nil
}

// stop stops the writes of the pod key names, if any.
func (w *writers) stop(key types.NamespacedName) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if started, ok := w.running[key]; ok {
		started.cancel()
		delete(w.running, key)
	}
}

// write writes bytes into volume for pod, rate bytes a second at most (0:
// as fast as the data plane takes them), until every byte is written, the
// volume is full, no replica can take a write, or ctx ends; it records the
// outcome as an Event on the pod.
func (w *writers) write(ctx context.Context, pod *corev1.Pod, volume string, bytes, rate int64) {
	log := ctrl.Log.WithName("simcluster-writer").WithValues("pod", klog.KObj(pod), "volume", volume)
	start := time.Now()
	var done int64
	tick := time.NewTicker(writeTick)
	defer tick.Stop()
	for done < bytes {
		chunk := min(bytes-done, writeChunk)
		if rate > 0 {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			chunk = min(bytes-done, max(rate*int64(writeTick)/int64(time.Second), 1))
		}
		n, err := w.writer.WriteVolume(ctx, volume, chunk)
		done += n
		switch {
		case errors.Is(err, ErrNoSpace):
			log.Info("A write failed: no replica of the volume could take it", "written", done, "err", err)
			w.recorder.Eventf(pod, nil, corev1.EventTypeWarning, EventReasonWriteFailed, "Write",
				"wrote %s of %s into volume %s, then: %v", quantity(done), quantity(bytes), volume, err)
			return
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			log.V(1).Info("A write did not reach the volume; retrying", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(writeRetry):
			}
			continue
		case n < chunk:
			// The volume's end: it holds all it can.
			w.recorder.Eventf(pod, nil, corev1.EventTypeNormal, EventReasonWritten, "Write",
				"wrote %s into volume %s in %s: it is full (%s were asked)", quantity(done), volume, time.Since(start).Round(time.Millisecond), quantity(bytes))
			return
		}
	}
	w.recorder.Eventf(pod, nil, corev1.EventTypeNormal, EventReasonWritten, "Write",
		"wrote %s into volume %s in %s", quantity(done), volume, time.Since(start).Round(time.Millisecond))
}

// quantity prints bytes as a binary quantity (30Gi).
func quantity(bytes int64) string {
	return resource.NewQuantity(bytes, resource.BinarySI).String()
}
