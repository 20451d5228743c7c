package extender

import (
	"maps"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/longhorn/diskschedule/internal/ledger"
)

// How the extender learned a pod's node.
const (
	knownByBinding      = "bound"
	knownBySelectedNode = "selected-node"
	knownByNomination   = "nominated"
	knownByBind         = "bind"
	knownByRebuild      = "rebuild"
	knownByRewrite      = "rewrite"
)

// waitWindow bounds how long the extender keeps counting a pod's space
// after its node is known while the ledgers do not show its reservations,
// how long after its entry lapsed a pod bound later is tracked again, and
// how long after its binding a pod's reservation that expired before the
// ledger saw the binding is written again (holdExpired).
const waitWindow = 5 * time.Minute

// inflight is one pod the extender let through whose space the ledgers do
// not show yet. Until its node is known its demand counts on every node the
// filter offered it (per disk, as packed there); then on that node alone,
// volume by volume, until the ledger shows each volume's reservation or its
// replica's request.
type inflight struct {
	pod types.NamespacedName
	uid types.UID
	// claims are the pod's claim names, for learning its node from a claim's
	// selected-node annotation.
	claims []string
	// offered are the nodes the filter passed, each with the pod's volumes
	// packed onto its disks. Only nodes where the pod needs new space are kept.
	offered map[string]fit
	// node is the pod's node once known ("" before), and known tells how.
	node  string
	known string
	// pending maps each volume still to be seen in a ledger of node to the
	// disk UUID it was packed onto; sizes are their sizes.
	pending map[string]string
	sizes   map[string]int64
	// replicas are the pending volumes Longhorn already placed a replica of
	// on node: the ledger shows their space as that replica's request.
	replicas map[string]placedReplica
	// refused are the pending volumes whose reservation the ledger had no
	// room for, or rejected, while the pod's node was known for good: their
	// claims stay until the reservation is written and granted.
	refused map[string]bool
	// filtered is when the filter answered; narrowed when the node became known.
	filtered, narrowed time.Time
}

// placedReplica is a replica Longhorn placed, and the disk it is on.
type placedReplica struct{ name, disk string }

// key returns the pod's "namespace/name", as reservations name it.
func (f *inflight) key() string { return f.pod.Namespace + "/" + f.pod.Name }

// overlay is the set of in-flight pods and the bytes they claim per disk.
// It is not safe for concurrent use: the in-flight state (flight) guards
// it with the lock under which it keeps the view of the ledgers.
type overlay struct {
	byUID map[types.UID]*inflight
	// byNode are the entries whose node is known, by node: a ledger's
	// change and a disk's write look at its node's entries alone.
	byNode map[string]map[types.UID]*inflight
	// perDisk is the bytes all entries claim on each disk UUID. Once handed
	// out by claims it is never changed: the next change edits a copy.
	perDisk map[string]int64
	// shared is set while perDisk is handed out (claims).
	shared bool
	// added counts the entries added: what pods in flight claim grows only
	// when one is (narrowing and settling take claims away).
	added uint64
	// changed is closed, and replaced, whenever an entry narrows or drops, so
	// that a filter waiting on the overlay looks again.
	changed chan struct{}
}

func newOverlay() *overlay {
	return &overlay{byUID: map[types.UID]*inflight{}, byNode: map[string]map[types.UID]*inflight{}, perDisk: map[string]int64{},
		changed: make(chan struct{})}
}

// len returns the number of entries.
func (o *overlay) len() int { return len(o.byUID) }

// get returns the entry of the pod with uid, or nil.
func (o *overlay) get(uid types.UID) *inflight { return o.byUID[uid] }

// demand returns the bytes in-flight pods claim on disk uuid.
func (o *overlay) demand(uuid string) int64 { return o.perDisk[uuid] }

// claims returns the bytes entries claim on each disk UUID, which stays as
// it is whatever the overlay does next, so it can be read without the lock.
func (o *overlay) claims() map[string]int64 {
	o.shared = true
	return o.perDisk
}

// within reports whether the entries claim no more on any disk that fits
// packed a pod's volumes onto than claimed, an earlier claims, says: true
// when no entry was added since, added being the count then.
func (o *overlay) within(added uint64, claimed map[string]int64, fits map[string]fit) bool {
	if o.added == added {
		return true
	}
	for _, ft := range fits {
		if !ft.OK {
			continue
		}
		for _, disk := range ft.Assignment {
			if o.perDisk[disk] > claimed[disk] {
				return false
			}
		}
	}
	return true
}

// add records e, replacing an entry of the same pod.
func (o *overlay) add(e *inflight) {
	o.drop(e.uid)
	o.byUID[e.uid] = e
	o.index(e)
	o.added++
	o.count(e, 1)
}

// narrow makes e count on node alone, with every volume packed there still
// to be seen in a ledger. It returns false, and drops e, when the filter did
// not offer node (the pod's new space there is not known).
func (o *overlay) narrow(e *inflight, node, how string, now time.Time) bool {
	if e.node != "" {
		return e.node == node
	}
	f, ok := e.offered[node]
	o.count(e, -1)
	if !ok {
		delete(o.byUID, e.uid)
		o.signal()
		return false
	}
	e.node, e.known, e.narrowed = node, how, now
	o.index(e)
	e.offered = map[string]fit{node: f}
	e.pending = make(map[string]string, len(f.Assignment))
	e.sizes = make(map[string]int64, len(f.Assignment))
	e.replicas = map[string]placedReplica{}
	for v, disk := range f.Assignment {
		e.pending[v] = disk
		e.sizes[v] = f.Sizes[v]
	}
	o.count(e, 1)
	o.signal()
	return true
}

// settle ends volume's claim in e once the ledger shows it; the entry drops
// when nothing is left. It reports whether e dropped.
func (o *overlay) settle(e *inflight, volume string) bool {
	disk, ok := e.pending[volume]
	if !ok {
		return false
	}
	o.claim(disk, -e.sizes[volume])
	delete(e.pending, volume)
	if len(e.pending) == 0 {
		delete(o.byUID, e.uid)
		o.unindex(e)
	}
	o.signal()
	return len(e.pending) == 0
}

// drop removes the entry of the pod with uid, if any.
func (o *overlay) drop(uid types.UID) *inflight {
	e := o.byUID[uid]
	if e == nil {
		return nil
	}
	o.count(e, -1)
	delete(o.byUID, uid)
	o.unindex(e)
	o.signal()
	return e
}

// onNode returns the entries whose node is node, in a stable order.
func (o *overlay) onNode(node string) []*inflight {
	out := make([]*inflight, 0, len(o.byNode[node]))
	for _, e := range o.byNode[node] {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].uid < out[j].uid })
	return out
}

// index records e under its node, once known.
func (o *overlay) index(e *inflight) {
	if e.node == "" {
		return
	}
	on := o.byNode[e.node]
	if on == nil {
		on = map[types.UID]*inflight{}
		o.byNode[e.node] = on
	}
	on[e.uid] = e
}

// unindex forgets e under its node.
func (o *overlay) unindex(e *inflight) {
	if on := o.byNode[e.node]; on != nil && on[e.uid] == e {
		delete(on, e.uid)
		if len(on) == 0 {
			delete(o.byNode, e.node)
		}
	}
}

// entries returns every entry, in a stable order.
func (o *overlay) entries() []*inflight {
	out := make([]*inflight, 0, len(o.byUID))
	for _, e := range o.byUID {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].uid < out[j].uid })
	return out
}

// count adds (sign 1) or removes (sign -1) e's claims to perDisk: every
// offered node's packing before the node is known, the pending volumes after.
func (o *overlay) count(e *inflight, sign int64) {
	if e.node != "" {
		for v, disk := range e.pending {
			o.claim(disk, sign*e.sizes[v])
		}
		return
	}
	for _, f := range e.offered {
		for v, disk := range f.Assignment {
			o.claim(disk, sign*f.Sizes[v])
		}
	}
}

// claim adds size bytes (less when negative) to what entries claim on disk.
func (o *overlay) claim(disk string, size int64) {
	if size == 0 {
		return
	}
	if o.shared {
		o.perDisk, o.shared = maps.Clone(o.perDisk), false
	}
	o.perDisk[disk] = ledger.AddSat(o.perDisk[disk], size)
	if o.perDisk[disk] <= 0 {
		delete(o.perDisk, disk)
	}
}

// signal wakes the filters waiting on the overlay.
func (o *overlay) signal() {
	close(o.changed)
	o.changed = make(chan struct{})
}

// keepsClaim reports whether entry's claims outlive a refusal: its pod is
// bound to its node, or kube-scheduler's volume binding chose the node for
// its claims, so its volumes need that node's space whatever the ledger
// granted meanwhile (Longhorn may have placed another volume's replica
// there between the pod's filter and its reservation).
func keepsClaim(entry *inflight) bool {
	switch entry.known {
	case knownByBinding, knownBySelectedNode, knownByRebuild, knownByRewrite:
		return true
	}
	return false
}

// markVolume adds volume to set, allocating it when nil.
func markVolume(set map[string]bool, volume string) map[string]bool {
	if set == nil {
		set = map[string]bool{}
	}
	set[volume] = true
	return set
}
