package replicawriter

import (
	"context"
	"errors"
	"fmt"
	"time"

	lhv1 "github.com/longhorn/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

const (
	// quickRetries is longhorn-manager's maxRetries: a volume whose sync
	// failed is requeued this many times with the queue's backoff, then
	// dropped until something brings it back.
	quickRetries = 3
	// firstBackoff is the first delay of the per-item backoff of
	// longhorn-manager's queues (EnhancedDefaultControllerRateLimiter):
	// 5 ms, doubling.
	firstBackoff = 5 * time.Millisecond
	// LonghornResync is longhorn-manager's informer resync period: a volume
	// dropped from the queue, or whose replica found no disk, is looked at
	// again at the latest after it.
	LonghornResync = 30 * time.Second
	// touchedLabel is the label the other client sets on a replica to make
	// a write lose on its resourceVersion.
	touchedLabel = "diskschedule.test/touched"
)

// Options shape one volume controller's placement.
type Options struct {
	// Live reads and writes the API server directly: Longhorn Nodes for the
	// current-view check, DiskSchedules and the touch of a lost write.
	Live client.Client
	// Resync is when a volume dropped from the queue is looked at again
	// without a Node change: LonghornResync in Longhorn; a test may shorten
	// it.
	Resync time.Duration
	// Lose, when set, is asked before each write, with the outcome so far,
	// whether this write is to be lost while the gate holds it.
	Lose func(Outcome) bool
	// Writing, when set, is called before each write.
	Writing func()
	// MaxRefusals, when positive, makes Place give up with an error after
	// that many refused writes.
	MaxRefusals int
}

// Outcome is what became of one replica's placement.
type Outcome struct {
	// Placed tells that the replica is persisted on a disk; NodeID and
	// DiskID name it.
	Placed         bool
	NodeID, DiskID string
	// Denied counts the writes the gate denied (Forbidden), Refused every
	// write refused for another reason than a conflict (denials included),
	// Conflicts the writes that lost on resourceVersion, and Lost those of
	// them that lost while the gate held their request in the ledger: no
	// write backs that request, granted or not, and the mirror releases it
	// as soon as its cache shows the replica moved on (the gate then
	// refuses the write it still holds, or has admitted it already; the
	// API server reports the conflict either way).
	Denied, Refused, Conflicts, Lost int
	// Start is when the first scheduling attempt began; Answered is when
	// the API server answered the write that placed the replica.
	Start, Answered time.Time
}

// Place plays the volume controller of the pod that owns the named volume
// until its unscheduled replica is placed, or Longhorn's scheduler finds no
// disk for it on a current view. Each attempt is longhorn-manager v1.12's
// syncVolume for a replica without a node: the volume and its replicas from
// the pod's datastore cache, Longhorn's ScheduleReplica(replica,
// replicasOfVolume, volume), and the replica written with the datastore's
// UpdateReplica with the cached resourceVersion, as the sync's deferred
// update writes it.
//
// A refused write is retried as longhorn-manager's queue retries the
// volume: a conflict at once (syncVolume requeues it); any other refusal
// (a gate denial, a timeout, no webhook) three times with the queue's
// backoff (5, 10, 20 ms), then only at the pod's next Longhorn Node event
// or after Resync (the volume dropped from the queue until then).
//
// When the scheduler finds no disk, Longhorn looks at the volume again at
// the next Node event or after 30 s. Place instead stops, without placing,
// once the scheduler found no candidate on a view that was current: after
// such an attempt it waits until the pod's datastore holds every Longhorn
// Node at least at the resourceVersion the API server returns then; if a
// Node event reached the datastore since the attempt read it, it tries
// again at once, and otherwise the attempt saw the Nodes the API server
// holds, so Longhorn would find no disk either until a Node changes.
func (p *Pod) Place(ctx context.Context, volume, replica string, opts Options) (Outcome, error) {
	out := Outcome{Start: time.Now()}
	requeues := 0
	for {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		nodeEvent := p.nextNodeEvent()
		vol, err := p.DataStore.GetVolumeRO(volume)
		if err != nil {
			return out, fmt.Errorf("getting volume %s from the datastore: %w", volume, err)
		}
		replicas, err := p.DataStore.ListVolumeReplicas(volume)
		if err != nil {
			return out, fmt.Errorf("listing the replicas of volume %s from the datastore: %w", volume, err)
		}
		r := replicas[replica]
		if r == nil {
			return out, fmt.Errorf("replica %s of volume %s is not in the datastore", replica, volume)
		}
		if r.Spec.NodeID != "" {
			// A write reported as refused landed after all.
			out.Placed, out.NodeID, out.DiskID = true, r.Spec.NodeID, r.Spec.DiskID
			out.Answered = p.answers.last(replica)
			return out, nil
		}
		placed, _ := p.Scheduler.ScheduleReplica(r, replicas, vol)
		if placed == nil {
			if err := p.catchUp(ctx, opts.Live); err != nil {
				return out, err
			}
			select {
			case <-nodeEvent:
				continue
			default:
				return out, nil
			}
		}

		lost, err := p.write(ctx, placed, opts, out)
		switch {
		case err == nil:
			out.Placed, out.NodeID, out.DiskID = true, placed.Spec.NodeID, placed.Spec.DiskID
			out.Answered = p.answers.last(replica)
			return out, nil
		case apierrors.IsConflict(err):
			out.Conflicts++
			if lost {
				out.Lost++
			}
			requeues = 0
			continue
		case apierrors.IsNotFound(err):
			return out, fmt.Errorf("replica %s is gone: %w", replica, err)
		case apierrors.IsForbidden(err):
			out.Denied++
		}
		out.Refused++
		if opts.MaxRefusals > 0 && out.Refused >= opts.MaxRefusals {
			return out, fmt.Errorf("placing replica %s on disk %s, refused %d times: %w", replica, placed.Spec.DiskID, out.Refused, err)
		}
		if requeues < quickRetries {
			if err := sleep(ctx, firstBackoff<<requeues); err != nil {
				return out, err
			}
			requeues++
			continue
		}
		requeues = 0
		if err := waitFor(ctx, nodeEvent, opts.Resync); err != nil {
			return out, err
		}
	}
}

// write writes the placed replica with the datastore's UpdateReplica. A
// write to be lost (opts.Lose) has the replica touched by the live client
// once the gate has put its request into the disk's ledger, that is while
// the gate holds the write, after the API server's resourceVersion check:
// when the gate admits it, the write then loses on resourceVersion. (When
// the gate denies it, the API server, retrying the write on the replica as
// it is now, reports the conflict too.) A replica the ledger already holds a
// request for (an earlier write's grant) is written as it is: its request
// could not tell this write's. lost tells that the write conflicted after
// the touch: it lost while the gate held its request.
func (p *Pod) write(ctx context.Context, placed *lhv1.Replica, opts Options, sofar Outcome) (lost bool, err error) {
	if opts.Writing != nil {
		opts.Writing()
	}
	lose := opts.Lose != nil && opts.Lose(sofar)
	if lose {
		ds, err := p.ledger(ctx, opts.Live, placed)
		_, held := ds.Spec.Replicas[placed.Name]
		lose = err == nil && !held
	}
	if !lose {
		_, err := p.DataStore.UpdateReplica(placed)
		return false, err
	}
	done := make(chan struct{})
	touched := make(chan bool, 1)
	go func() { touched <- p.touchWhenRequested(ctx, opts.Live, placed, done) }()
	_, err = p.DataStore.UpdateReplica(placed)
	close(done)
	return <-touched && apierrors.IsConflict(err), err
}

// ledger reads the DiskSchedule of the replica's disk from the API server.
func (p *Pod) ledger(ctx context.Context, live client.Reader, placed *lhv1.Replica) (*dsv1.DiskSchedule, error) {
	ds := &dsv1.DiskSchedule{}
	if err := live.Get(ctx, types.NamespacedName{Namespace: p.namespace, Name: placed.Spec.DiskID}, ds); err != nil {
		return ds, fmt.Errorf("getting the DiskSchedule of disk %s: %w", placed.Spec.DiskID, err)
	}
	return ds, nil
}

// touchWhenRequested waits until the ledger of the replica's disk holds a
// request for it, or done is closed, and then changes a label of the
// replica; it reports whether it did.
func (p *Pod) touchWhenRequested(ctx context.Context, live client.Client, placed *lhv1.Replica, done <-chan struct{}) bool {
	for {
		if ds, err := p.ledger(ctx, live, placed); err == nil {
			if _, ok := ds.Spec.Replicas[placed.Name]; ok {
				break
			}
		}
		select {
		case <-done:
			return false
		case <-ctx.Done():
			return false
		case <-time.After(2 * time.Millisecond):
		}
	}
	touch := &lhv1.Replica{ObjectMeta: metav1.ObjectMeta{Namespace: p.namespace, Name: placed.Name}}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"%d"}}}`, touchedLabel, time.Now().UnixNano())
	return live.Patch(ctx, touch, client.RawPatch(types.MergePatchType, []byte(patch))) == nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitFor waits until event is closed, resync has passed or ctx ends.
func waitFor(ctx context.Context, event <-chan struct{}, resync time.Duration) error {
	if resync <= 0 {
		return errors.New("no resync period: a dropped volume would never be looked at again")
	}
	t := time.NewTimer(resync)
	defer t.Stop()
	select {
	case <-event:
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}
