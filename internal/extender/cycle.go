package extender

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
	"github.com/longhorn/diskschedule/internal/ledger"
)

// This file is what the diskschedule scheduler plugin
// (internal/schedulerplugin) asks of the Extender at kube-scheduler's
// framework extension points. Each is the extender's own step, not a copy:
// Evaluate is the filter's evaluation (evaluate, with the overlay and room
// elsewhere) over a cycle's nodes at once, Cycle.Scores the prioritizer's
// rule (scoreNodes), Hold records the pod in flight on its node as the
// filter and /bind do, Reserve is /bind's write of the reservations, and
// AwaitDecisions waits for the ledger to decide them.

// decisionPoll is how often AwaitDecisions reads the ledgers from the
// cache.
const decisionPoll = 20 * time.Millisecond

// Cycle is the extender's decision on one pod for one scheduling cycle:
// which nodes can hold its volumes, and how they would be packed there.
// Nothing changes it once Evaluate returns it.
type Cycle struct {
	pod *corev1.Pod
	q   question
	// restart is the node that holds a replica of every volume, the only
	// one the pod may go to; empty when none does.
	restart string
	snap    *snapshot
	fits    map[string]fit
}

// Evaluate decides which of nodes can hold pod's volumes, as the
// extender's filter does: against the ledgers less what the pods in flight
// claim, with room for the volumes' other replicas elsewhere. It returns
// nil when no volume of the pod needs space on its node: every node
// passes, unscored, and nothing is reserved. A pod being evaluated again
// (a new scheduling cycle) first stops counting in flight.
func (e *Extender) Evaluate(ctx context.Context, pod *corev1.Pod, nodes []string) (*Cycle, error) {
	if err := e.fenced(); err != nil {
		return nil, err
	}
	vols, sched, err := e.load(ctx, pod)
	if err != nil {
		return nil, fmt.Errorf("reading the volumes of pod %s: %w", client.ObjectKeyFromObject(pod), err)
	}
	if len(vols) == 0 {
		return nil, nil
	}
	c := &Cycle{pod: pod, q: question{pod: pod.Namespace + "/" + pod.Name, vols: vols, candidates: nodes, sched: sched,
		how: withOverlay | withRoomElsewhere, budget: e.opts.Budget}}
	if c.restart = restartNode(vols, nodes); c.restart != "" {
		e.flight.forget(pod.UID)
		return c, nil
	}
	c.snap = e.flight.snapshot(pod.UID)
	c.fits = e.evaluate(c.snap, c.q)
	return c, nil
}

// Nodes returns the only node the pod may go to (the node that holds a
// replica of every volume of the pod), or nil when any node that fits may.
func (c *Cycle) Nodes() []string {
	if c.restart == "" {
		return nil
	}
	return []string{c.restart}
}

// Fits reports whether node can hold the pod's volumes and, when not, why,
// in numbers.
func (c *Cycle) Fits(node string) (bool, string) {
	if c.restart != "" {
		if node == c.restart {
			return true, ""
		}
		return false, fmt.Sprintf("node %s already holds a replica of every volume of the pod", c.restart)
	}
	ft, ok := c.fits[node]
	if !ok {
		return false, fmt.Sprintf("node %s was not evaluated for the pod", node)
	}
	return ft.OK, ft.Reason
}

// Scores scores nodes 0–10 as the extender's prioritize does (scoreNodes).
func (c *Cycle) Scores(nodes []string) map[string]int64 {
	return scoreNodes(c.q.vols, c.fits, nodes)
}

// Hold counts the space the pod's volumes take on node in flight, from
// now until the ledgers show its reservations or Release: the node
// kube-scheduler chose for it in cycle c. When the pods held meanwhile
// claim more on the disks it was packed onto, node is evaluated again; a
// node that no longer fits fails with ErrRefused. The reservations are
// left for Reserve to write.
func (e *Extender) Hold(c *Cycle, node string) error {
	if c == nil || c.restart != "" {
		return nil // nothing new on the node that holds every replica
	}
	q := c.q
	q.candidates = []string{node}
	s, ft := c.snap, c.fits[node]
	for {
		if !ft.OK {
			return fmt.Errorf("%w: the volumes of pod %s no longer fit on node %s: %s", ErrRefused, q.pod, node, ft.Reason)
		}
		if len(ft.Assignment) == 0 {
			return nil // every volume has its replica there
		}
		ok, later := e.flight.adopt(s, c.pod, node, knownByBind, ft)
		e.adoptLater(e.background, later)
		if ok {
			return nil
		}
		if s = e.flight.adoptSnapshot(c.pod.UID); s == nil {
			return nil // held already
		}
		ft = e.evaluate(s, q)[node]
	}
}

// Release stops counting the pod with uid in flight: kube-scheduler gave
// up the node it was held on.
func (e *Extender) Release(uid types.UID) {
	e.flight.expirePod(uid, "unreserved")
}

// Reservation is one reservation Reserve wrote (or found written) in a
// disk's ledger, for AwaitDecisions.
type Reservation struct {
	disk, volume, pod string
	size              int64
}

// AwaitDecisions waits, for at most timeout, until the ledgers have decided
// held, the reservations Reserve wrote. A reservation the ledger rejected
// fails with ErrRefused and the ledger's reason in numbers; one that
// expired before it was seen decided, or no decision in time, fails with
// another error. A reservation a replica took over (fulfilled) is granted.
func (e *Extender) AwaitDecisions(ctx context.Context, held []Reservation, timeout time.Duration) error {
	pending := held
	var refused error
	err := wait.PollUntilContextTimeout(ctx, decisionPoll, timeout, true, func(ctx context.Context) (bool, error) {
		var still []Reservation
		for _, r := range pending {
			ds := &dsv1.DiskSchedule{}
			if err := e.opts.Client.Get(ctx, types.NamespacedName{Namespace: e.opts.Namespace, Name: r.disk}, ds,
				client.UnsafeDisableDeepCopy); err != nil {
				return false, fmt.Errorf("reading DiskSchedule %s: %w", r.disk, err)
			}
			res, state, ok := ledger.ReservationOf(ds, r.volume)
			switch {
			case !ok || res.Pod != r.pod || res.Size != r.size || state == "":
				still = append(still, r) // not seen written, or not decided yet
			case state == dsv1.ReservationStateRejected:
				refused = fmt.Errorf("%w: volume %s on disk %s of node %s: %s", ErrRefused, r.volume, ds.Spec.Name, ds.Spec.NodeID,
					ds.Status.Reservations[r.volume].Message)
				return true, nil
			case state == dsv1.ReservationStateExpired:
				return false, fmt.Errorf("the reservation of volume %s on disk %s of node %s expired before the pod was bound",
					r.volume, ds.Spec.Name, ds.Spec.NodeID)
			}
		}
		pending = still
		return len(pending) == 0, nil
	})
	if refused != nil {
		return refused
	}
	if err != nil {
		return fmt.Errorf("waiting for the ledgers to decide %d reservations: %w", len(pending), err)
	}
	return nil
}
