package ledger

import (
	"fmt"
	"math"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dsv1 "github.com/longhorn/diskschedule/api/v1beta2"
)

// Disk is what the decision needs to know of the disk behind a ledger.
type Disk struct {
	// Limit is the ledger limit (see Limit).
	Limit int64
	// Schedulable is false when new requests must be rejected (rule 8).
	Schedulable bool
	// Reason and Message say why the disk is not schedulable, or confirm it is.
	Reason, Message string
	// Space is the disk's actual space as Longhorn last reported it: a new
	// replica request is also rejected when Longhorn's actual-space rule
	// would refuse it (ActualSpace.Failure). nil: the rule is not applied.
	Space *ActualSpace
}

// Input is everything one admission decision depends on.
type Input struct {
	// Spec is the requests, as read.
	Spec dsv1.DiskScheduleSpec
	// Generation is the metadata.generation the spec was read at.
	Generation int64
	// Previous is the status as read: earlier decisions stay unless their
	// request changed.
	Previous dsv1.DiskScheduleStatus
	// Disk is the disk's limit and schedulability.
	Disk Disk
	// PlacedVolumes maps each replica Longhorn persisted on this disk to its
	// volume: a reservation of that volume ends once that replica is granted
	// here, whether or not a request named the reservation (rule 5).
	PlacedVolumes map[string]string
	// Persisted names the replicas and backing-image copies Longhorn has
	// already persisted on this disk (a Replica whose spec.diskID is this
	// disk, a BackingImage whose diskFileSpecMap lists it): their new
	// requests are adopted, granted even over the limit (rule 7).
	Persisted Owners
	// ActualSizes maps a replica request to the bytes of data its replica
	// holds (its volume's status.actualSize, what Longhorn's scheduler takes
	// as the replica's required storage); a missing one holds none. A new
	// request needs them in actual space, and a grant Longhorn has not
	// counted yet takes them from it (Disk.Space).
	ActualSizes map[string]int64
	// Pods maps a reservation (by volume) to what the controller knows of
	// its pod (rule 6). A reservation missing here has a pod that is not
	// bound yet.
	Pods map[string]PodBinding
	// NodeReplicas maps a reservation (by volume) to a replica of its volume
	// that Longhorn persisted on another disk of this disk's node: the
	// reservation is fulfilled, its space released (rule 6). A replica
	// persisted on this disk ends the reservation once granted here
	// (PlacedVolumes).
	NodeReplicas map[string]string
	// ReplicaImages maps a replica Longhorn persisted on this disk to the
	// backing image its volume starts from (the Replica's
	// spec.backingImage); a replica without one is missing. A copy of that
	// image on this disk is what the replica, once granted here, needs to
	// start: it is growth of what is placed here (rule 8), never refused,
	// and adopted when it does not fit (rule 7, DESIGN §4).
	ReplicaImages map[string]string
	// BestEffort names the volumes, by reservation, whose dataLocality is
	// best-effort: their reservation yields at once to a Longhorn placement
	// or growth that fits what Longhorn counts on the disk (rule 6). Any
	// other reservation (strict-local, or a volume not known yet) yields
	// only once its pod has been bound to this disk's node for
	// ReservationTimeout (PodBinding.Since); before its pod is bound it
	// expires at expiresAt.
	BestEffort map[string]bool
	// ReservationTimeout is how long a granted reservation whose pod is not
	// bound yet lives unless a replica takes it over (rule 6), and how long
	// a reservation that is not best-effort may hold against Longhorn's
	// placements once its pod is bound.
	ReservationTimeout time.Duration
	// Now is the decision's time.
	Now time.Time
}

// PodState is where a reservation's pod is, as the controller sees it.
type PodState string

const (
	// PodNotBound: the pod is not bound to a node yet (the zero value, for a
	// reservation missing from Input.Pods): its reservation expires at
	// expiresAt.
	PodNotBound PodState = ""
	// PodBoundHere: the pod is bound to the disk's node: the ledger holds
	// its reservation with no expiry.
	PodBoundHere PodState = "BoundHere"
	// PodBoundElsewhere: the pod is bound to another node: its reservation
	// is released.
	PodBoundElsewhere PodState = "BoundElsewhere"
	// PodGone: the pod was not found, or is being deleted: a reservation
	// held for it is released; one not held yet expires at expiresAt, as a
	// pod the controller has not seen yet would.
	PodGone PodState = "Gone"
)

// PodBinding is what the controller knows of a reservation's pod.
type PodBinding struct {
	// State is where the pod is.
	State PodState
	// Node is the node the pod is bound to, for PodBoundElsewhere.
	Node string
	// Since is when the pod was bound (its PodScheduled condition's
	// lastTransitionTime), for PodBoundHere; zero when not known.
	Since time.Time
}

// Owners names replicas and backing images, by the ledger entries they own.
type Owners struct {
	// Replicas are replica names.
	Replicas map[string]bool
	// BackingImages are backing-image names.
	BackingImages map[string]bool
}

// Has reports whether o names the entry name of kind k.
func (o Owners) Has(k Kind, name string) bool {
	if k == BackingImage {
		return o.BackingImages[name]
	}
	return o.Replicas[name]
}

// Outcome summarises one decision, for metrics, events and requeueing.
type Outcome struct {
	// Granted counts requests granted by this decision.
	Granted int
	// Rejected counts requests rejected by this decision.
	Rejected int
	// Released counts entries released (removed, garbage-collected, expired or handed off).
	Released int
	// Adopted counts requests granted over the limit because their replica already runs on the disk.
	Adopted int
	// NextExpiry is the earliest expiresAt among granted reservations, or
	// zero. A reservation held for a bound pod has no expiresAt, so it never
	// sets it.
	NextExpiry time.Time
	// Yielded lists the reservations cut in this decision for a Longhorn
	// placement or growth that fits what Longhorn counts (rule 6), for an
	// Event on each one's pod.
	Yielded []Yield
}

// Yield is a reservation cut for a Longhorn placement or growth (rule 6).
type Yield struct {
	// Volume is the reservation's volume.
	Volume string
	// Pod is its pod, "namespace/name".
	Pod string
	// Message says for what, in the ledger's numbers.
	Message string
}

// Decide returns the ledger's next status for in: every request in the spec
// decided, removed and garbage-collected entries freed, and storageScheduled
// never above the limit except through adoption. It is deterministic: the
// same input gives the same status.
func Decide(in Input) (dsv1.DiskScheduleStatus, Outcome) {
	d := decider{in: in, limit: in.Disk.Limit}
	d.out.ObservedGeneration = in.Generation
	d.out.StorageLimit = d.limit
	d.out.Conditions = append([]metav1.Condition(nil), in.Previous.Conditions...)

	d.keepDecided()
	d.shrink()
	d.holdUndecided()
	d.releaseReservations(true)
	d.handOff()
	d.fulfillPlaced()
	d.fulfillOnNode()
	// A reservation kept for a handoff that did not happen (the replica's
	// extra did not fit) is released now, before grow, so its bytes are free
	// for this very decision and no ended reservation is written as
	// scheduled.
	d.releaseReservations(false)
	d.grow()
	d.countReleased()
	d.used = scheduledSum(d.out)
	d.setConditions()
	d.out.StorageScheduled = d.used
	d.out.Scheduled = resource.NewQuantity(d.used, resource.BinarySI)
	d.out.Limit = resource.NewQuantity(d.limit, resource.BinarySI)
	return d.out, d.outcome
}

type decider struct {
	in      Input
	limit   int64
	used    int64
	out     dsv1.DiskScheduleStatus
	outcome Outcome
	// handedOff names replica requests decided by a reservation handoff.
	handedOff map[string]bool
	// actualSince is the actual bytes of the grants Longhorn's disk status
	// does not count yet (Disk.Space), and actualCounted names the entries
	// in it, so none is counted twice.
	actualSince   int64
	actualCounted map[entryKey]bool
}

// set writes the decision st on the entry name of kind k.
func (d *decider) set(k Kind, name string, st dsv1.RequestStatus) {
	out := Decisions(&d.out, k)
	if *out == nil {
		*out = map[string]dsv1.RequestStatus{}
	}
	(*out)[name] = st
	d.charge(st.ScheduledSize)
	d.out.StorageScheduled = d.used
	if st.ScheduledSize > 0 {
		d.takeActual(k, name, st.ScheduledSize)
	}
}

// takeActual counts, once, the actual bytes a granted entry of kind k,
// holding scheduled bytes, takes on the disk when Longhorn's disk status
// does not count it yet: a replica's data (Input.ActualSizes), a
// backing-image copy's size.
func (d *decider) takeActual(k Kind, name string, scheduled int64) {
	space := d.in.Disk.Space
	key := entryKey{k, name}
	if space == nil || d.actualCounted[key] || space.counted(k, name) {
		return
	}
	if d.actualCounted == nil {
		d.actualCounted = map[entryKey]bool{}
	}
	d.actualCounted[key] = true
	bytes := scheduled
	if k == Replica {
		bytes = d.in.ActualSizes[name]
	}
	d.actualSince = AddSat(d.actualSince, max(bytes, 0))
}

// entryKey names one entry of one kind.
type entryKey struct {
	kind Kind
	name string
}

// noActualSpace returns why the disk's actual space cannot take the new
// replica request name (Longhorn's actual-space rule, counting what was
// granted since Longhorn measured the disk), or "".
func (d *decider) noActualSpace(name string) string {
	if d.in.Disk.Space == nil {
		return ""
	}
	return d.in.Disk.Space.Failure(d.actualSince, d.in.ActualSizes[name])
}

func (d *decider) setReservation(name string, st dsv1.ReservationStatus) {
	if d.out.Reservations == nil {
		d.out.Reservations = map[string]dsv1.ReservationStatus{}
	}
	if old, ok := d.out.Reservations[name]; ok {
		d.uncharge(old.ScheduledSize)
	}
	d.out.Reservations[name] = st
	d.charge(st.ScheduledSize)
	d.out.StorageScheduled = d.used
}

// requests returns the spec's requests of kind k.
func (d *decider) requests(k Kind) map[string]dsv1.RequestedBytes {
	return *Requests(&d.in.Spec, k)
}

// previous returns the previous status's decisions of kind k.
func (d *decider) previous(k Kind) map[string]dsv1.RequestStatus {
	return *Decisions(&d.in.Previous, k)
}

// decided returns the decisions of kind k written so far.
func (d *decider) decided(k Kind) map[string]dsv1.RequestStatus {
	return *Decisions(&d.out, k)
}

// undecided returns, by name, the requests of kind k with no decision
// written so far.
func (d *decider) undecided(k Kind) []string {
	var names []string
	for _, name := range sortedKeys(d.requests(k)) {
		if _, done := d.decided(k)[name]; !done {
			names = append(names, name)
		}
	}
	return names
}

// keepDecided carries over every decision whose request is unchanged.
func (d *decider) keepDecided() {
	for _, k := range Kinds() {
		requests := d.requests(k)
		for _, name := range sortedKeys(requests) {
			if prev, ok := d.previous(k)[name]; ok && prev.RequestedSize == int64(requests[name]) {
				d.set(k, name, prev)
			}
		}
	}
	for _, name := range sortedKeys(d.in.Spec.Reservations) {
		if prev, ok := d.in.Previous.Reservations[name]; ok && reservationDecided(d.in.Spec.Reservations[name], prev) {
			d.setReservation(name, prev)
		}
	}
}

// shrink grants every request at or below its granted size: a shrink never
// needs space (rule 3).
func (d *decider) shrink() {
	for _, k := range Kinds() {
		for _, name := range d.undecided(k) {
			requested := int64(d.requests(k)[name])
			if prev, ok := d.previous(k)[name]; ok && requested <= prev.ScheduledSize {
				d.outcome.Granted++
				d.set(k, name, dsv1.RequestStatus{State: dsv1.RequestStateScheduled, RequestedSize: requested, ScheduledSize: requested})
			}
		}
	}
}

// holdUndecided counts, for every replica and backing-image request still to
// be decided, the bytes its previous decision holds: a growth that does not
// fit keeps them (rule 3), so no other request may take them in this
// decision, and a growth needs only its delta on top of them. Whoever decides
// such a request later gives its held bytes back (release) before charging
// the new decision.
func (d *decider) holdUndecided() {
	for _, k := range Kinds() {
		for _, name := range sortedKeys(d.requests(k)) {
			if held := d.heldBy(k, name); held > 0 {
				d.charge(held)
				d.takeActual(k, name, held)
			}
		}
	}
}

// heldBy returns the bytes the previous decision on the undecided request
// name of kind k still holds, or 0 when the request is decided.
func (d *decider) heldBy(k Kind, name string) int64 {
	if _, done := d.decided(k)[name]; done {
		return 0
	}
	return d.previous(k)[name].ScheduledSize
}

// release gives back bytes counted by holdUndecided, right before the
// request holding them is decided and charged its new scheduled size.
func (d *decider) release(held int64) {
	d.uncharge(held)
}

// charge counts bytes more as used. The count saturates at
// math.MaxInt64 (AddSat), and a saturated count stays saturated
// (uncharge, usedLess): a ledger whose entries add up past what an int64
// holds is full, and grants no growth in this decision. Decide counts its
// entries again once they are all decided.
func (d *decider) charge(bytes int64) {
	d.used = AddSat(d.used, bytes)
}

// uncharge counts bytes less as used, unless the count is saturated.
func (d *decider) uncharge(bytes int64) {
	d.used = d.usedLess(bytes)
}

// usedLess returns the bytes used less bytes, or math.MaxInt64 while the
// count is saturated (charge).
func (d *decider) usedLess(bytes int64) int64 {
	if d.used == math.MaxInt64 {
		return math.MaxInt64
	}
	return AddSat(d.used, -bytes)
}

// releaseReservations applies rule 6 to every granted reservation: one
// whose pod is bound to this disk's node is held, without expiresAt; one
// whose pod is bound to another node, or is gone after its reservation was
// held, is released; one whose pod is not bound yet expires at expiresAt.
// With spareHandoffs, a reservation a replica may take over in this very
// decision is left for handOff.
func (d *decider) releaseReservations(spareHandoffs bool) {
	for _, name := range sortedKeys(d.out.Reservations) {
		st := d.out.Reservations[name]
		if st.State != dsv1.ReservationStateScheduled {
			continue
		}
		msg := d.reservationEnd(name, st)
		if msg == "" {
			if expires := d.expiryOf(name, st); !expires.Equal(st.ExpiresAt) {
				st.ExpiresAt = expires
				d.setReservation(name, st)
			}
			continue
		}
		if spareHandoffs && d.handoffCandidate(name) != "" {
			continue
		}
		st.State = dsv1.ReservationStateExpired
		st.Message = msg
		st.ScheduledSize = 0
		st.ExpiresAt = nil
		d.setReservation(name, st)
		d.outcome.Released++
	}
}

// reservationEnd returns why the granted reservation st of volume ends now
// (rule 6), or "" when it still holds its space. A reservation held for a
// bound pod has no expiresAt.
func (d *decider) reservationEnd(volume string, st dsv1.ReservationStatus) string {
	pod := d.in.Pods[volume]
	held := st.ExpiresAt == nil
	switch {
	case pod.State == PodBoundHere:
		return ""
	case pod.State == PodBoundElsewhere:
		return fmt.Sprintf("pod %s bound to %s, not %s: %s released", st.Pod, pod.Node, d.in.Spec.NodeID, Bytes(st.ScheduledSize))
	case held && pod.State == PodGone:
		return fmt.Sprintf("pod %s deleted: %s released", st.Pod, Bytes(st.ScheduledSize))
	case !held && d.in.Previous.Reservations[volume].ExpiresAt != nil && !d.in.Now.Before(st.ExpiresAt.Time):
		// (An expiresAt given in this decision, expiryOf, is not due in it.)
		return fmt.Sprintf("expired at %s: no replica took over %s", st.ExpiresAt.UTC().Format(time.RFC3339), Bytes(st.ScheduledSize))
	}
	return ""
}

// expiryOf returns the expiresAt of the granted reservation st of volume,
// which still holds its space: none while its pod is bound to this disk's
// node, else the one it has, or a full timeout from now for a held
// reservation whose pod is not bound any more (a pod of that name created
// again after the bound one was deleted, which may yet bind here).
func (d *decider) expiryOf(volume string, st dsv1.ReservationStatus) *metav1.Time {
	if d.in.Pods[volume].State == PodBoundHere {
		return nil
	}
	if st.ExpiresAt != nil {
		return st.ExpiresAt
	}
	expires := metav1.NewTime(d.in.Now.Add(d.in.ReservationTimeout))
	return &expires
}

// handoffCandidate returns the pending replica request that takes over the
// named granted reservation, or "".
func (d *decider) handoffCandidate(volume string) string {
	res, ok := d.in.Spec.Reservations[volume]
	if !ok || res.Replica == "" {
		return ""
	}
	st, ok := d.out.Reservations[volume]
	if !ok || st.State != dsv1.ReservationStateScheduled {
		return ""
	}
	if _, inSpec := d.in.Spec.Replicas[res.Replica]; !inSpec {
		return ""
	}
	if _, decided := d.out.Replicas[res.Replica]; decided {
		return ""
	}
	return res.Replica
}

// handOff charges pending replica requests against the granted reservations
// that name them, in the same status write (rule 5): no other request can
// take that space in between.
func (d *decider) handOff() {
	for _, volume := range sortedKeys(d.out.Reservations) {
		replica := d.handoffCandidate(volume)
		if replica == "" {
			continue
		}
		res := d.out.Reservations[volume]
		requested := int64(d.in.Spec.Replicas[replica])
		// The reservation's bytes (and whatever an earlier decision on the
		// replica still holds) become the replica's; only growth beyond them
		// needs free space, and a disk that is not schedulable grants no new
		// space (rule 8).
		replicaHeld := d.heldBy(Replica, replica)
		held := AddSat(res.ScheduledSize, replicaHeld)
		if requested > held && (!d.in.Disk.Schedulable || !Fits(d.usedLess(held), requested, d.limit)) {
			continue // decided as an ordinary growth request below
		}
		res.State = dsv1.ReservationStateFulfilled
		res.ScheduledSize = 0
		res.ExpiresAt = nil
		res.Replica = replica
		res.Message = fmt.Sprintf("handed over to replica %s", replica)
		d.setReservation(volume, res)
		d.release(replicaHeld)
		d.set(Replica, replica, dsv1.RequestStatus{State: dsv1.RequestStateScheduled, RequestedSize: requested, ScheduledSize: requested})
		if d.handedOff == nil {
			d.handedOff = map[string]bool{}
		}
		d.handedOff[replica] = true
		d.outcome.Granted++
		d.outcome.Released++ // the reservation's hold ends
	}
}

// fulfillPlaced ends every reservation whose volume already has a granted
// replica that Longhorn persisted on this disk: that replica took the space
// over (rule 5) even if its request never named the reservation (it was
// placed before the reservation was written, or by a write the gate did not
// see), so the volume is not counted twice.
func (d *decider) fulfillPlaced() {
	placed := map[string]string{} // volume -> a granted replica of it on this disk
	for _, replica := range sortedKeys(d.in.PlacedVolumes) {
		if st, ok := d.out.Replicas[replica]; ok && st.State == dsv1.RequestStateScheduled && st.ScheduledSize > 0 {
			placed[d.in.PlacedVolumes[replica]] = replica
		}
	}
	for _, volume := range sortedKeys(d.in.Spec.Reservations) {
		replica, ok := placed[volume]
		if !ok {
			continue
		}
		if st, decided := d.out.Reservations[volume]; decided && st.State != dsv1.ReservationStateScheduled {
			continue
		}
		res := d.in.Spec.Reservations[volume]
		d.setReservation(volume, dsv1.ReservationStatus{
			State: dsv1.ReservationStateFulfilled, RequestedSize: res.Size, Pod: res.Pod, Replica: replica,
			Message: fmt.Sprintf("taken over by replica %s, which Longhorn placed on this disk", replica),
		})
		d.outcome.Released++
	}
}

// fulfillOnNode ends every granted reservation whose volume has a replica
// Longhorn persisted on another disk of this disk's node (rule 6): the pod
// has its local replica, whose own disk's ledger counts it.
func (d *decider) fulfillOnNode() {
	for _, volume := range sortedKeys(d.in.NodeReplicas) {
		st, ok := d.out.Reservations[volume]
		if !ok || st.State != dsv1.ReservationStateScheduled {
			continue
		}
		replica := d.in.NodeReplicas[volume]
		d.setReservation(volume, dsv1.ReservationStatus{
			State: dsv1.ReservationStateFulfilled, RequestedSize: st.RequestedSize, Pod: st.Pod, Replica: replica,
			Message: fmt.Sprintf("replica %s of the volume is persisted on node %s: %s released", replica, d.in.Spec.NodeID, Bytes(st.ScheduledSize)),
		})
		d.outcome.Released++
	}
}

// grow decides every request still undecided: new requests and growth of
// granted ones, in a fixed order (replicas, backing images, reservations,
// each by name), each granted when it fits under the limit.
func (d *decider) grow() {
	for _, k := range Kinds() {
		for _, name := range d.undecided(k) {
			prev, hadPrev := d.previous(k)[name]
			held := d.heldBy(k, name)
			size := int64(d.requests(k)[name])
			var st dsv1.RequestStatus
			switch {
			case d.in.Persisted.Has(k, name) && neverGranted(prev, hadPrev):
				st = d.adopt(k, size)
			case k == Replica:
				st = d.growReplica(name, size, prev, hadPrev, held)
			default:
				st = d.growCopy(name, size, prev, hadPrev, held)
			}
			d.release(held)
			d.set(k, name, st)
		}
	}
	d.growReservations()
}

// adopt grants a request of size bytes for what Longhorn already persisted
// on this disk, even over the limit (rule 7).
func (d *decider) adopt(k Kind, size int64) dsv1.RequestStatus {
	msg := "adopted: Longhorn already persisted the replica on this disk"
	if k == BackingImage {
		msg = "adopted: Longhorn already placed the backing image's copy on this disk"
	}
	d.outcome.Granted++
	d.outcome.Adopted++
	return dsv1.RequestStatus{State: dsv1.RequestStateScheduled, RequestedSize: size, ScheduledSize: size, Message: msg}
}

// growReplica decides the request of size bytes of replica name, which
// holds held bytes: a new replica also needs Longhorn's actual space; a
// growth does not (Longhorn checks a volume's expansion itself).
func (d *decider) growReplica(name string, size int64, prev dsv1.RequestStatus, hadPrev bool, held int64) dsv1.RequestStatus {
	placement := neverGranted(prev, hadPrev)
	if d.in.Disk.Schedulable && placement {
		if msg := d.noActualSpace(name); msg != "" {
			return d.reject(size, held, msg)
		}
	}
	return d.growth(size, prev, hadPrev, placement, "replica "+name)
}

// growCopy decides the request of size bytes for backing image image's
// copy, which holds held bytes.
func (d *decider) growCopy(image string, size int64, prev dsv1.RequestStatus, hadPrev bool, held int64) dsv1.RequestStatus {
	starts := d.startedBy(image)
	if starts == "" || !neverGranted(prev, hadPrev) {
		return d.growth(size, prev, hadPrev, neverGranted(prev, hadPrev), "backing image copy "+image)
	}
	// The copy a replica granted here needs to start: growth of what is
	// placed here, never refused (DESIGN §4). Longhorn's scheduler counted
	// the volume's size alone for the replica and counts the copy once it
	// exists: what does not fit is adopted as Longhorn will count it
	// (rule 7).
	st := dsv1.RequestStatus{State: dsv1.RequestStateScheduled, RequestedSize: size, ScheduledSize: size}
	if !d.room(size-held, "the backing image copy replica "+starts+" needs to start") {
		st.Message = fmt.Sprintf("adopted over the limit: replica %s, granted on this disk, needs the copy to start, and Longhorn counts it at %s once it exists (%s free of limit %s)",
			starts, Bytes(size), Bytes(max(d.limit-d.used, 0)), Bytes(d.limit))
		d.outcome.Adopted++
	}
	d.outcome.Granted++
	return st
}

// growReservations decides every reservation still undecided, by name.
func (d *decider) growReservations() {
	for _, name := range sortedKeys(d.in.Spec.Reservations) {
		if _, done := d.out.Reservations[name]; done {
			continue
		}
		res := d.in.Spec.Reservations[name]
		if r, ok := d.out.Replicas[res.Replica]; ok && res.Replica != "" && r.State == dsv1.RequestStateScheduled {
			// The reservation and the replica taking it over arrived before
			// either was decided: the replica's grant is the reservation's
			// fulfilment, so the space is charged once.
			d.setReservation(name, dsv1.ReservationStatus{
				State: dsv1.ReservationStateFulfilled, RequestedSize: res.Size, Pod: res.Pod, Replica: res.Replica,
				Message: fmt.Sprintf("handed over to replica %s", res.Replica),
			})
			d.outcome.Granted++
			continue
		}
		if pod := d.in.Pods[name]; pod.State == PodBoundElsewhere {
			// The pod will not use this node: nothing to hold (rule 6).
			d.setReservation(name, dsv1.ReservationStatus{
				State: dsv1.ReservationStateExpired, RequestedSize: res.Size, Pod: res.Pod,
				Message: fmt.Sprintf("pod %s bound to %s, not %s", res.Pod, pod.Node, d.in.Spec.NodeID),
			})
			continue
		}
		if replica, ok := d.in.NodeReplicas[name]; ok {
			// The volume's replica is on the node already: nothing to hold.
			d.setReservation(name, dsv1.ReservationStatus{
				State: dsv1.ReservationStateFulfilled, RequestedSize: res.Size, Pod: res.Pod, Replica: replica,
				Message: fmt.Sprintf("replica %s of the volume is persisted on node %s", replica, d.in.Spec.NodeID),
			})
			continue
		}
		st := d.growth(res.Size, dsv1.RequestStatus{}, false, true, "")
		out := dsv1.ReservationStatus{RequestedSize: res.Size, Pod: res.Pod, ScheduledSize: st.ScheduledSize, Message: st.Message}
		if st.State == dsv1.RequestStateScheduled {
			out.State = dsv1.ReservationStateScheduled
			// A bound pod's reservation is held with no expiry (rule 6).
			if d.in.Pods[name].State != PodBoundHere {
				expires := metav1.NewTime(d.in.Now.Add(d.in.ReservationTimeout))
				out.ExpiresAt = &expires
			}
		} else {
			out.State = dsv1.ReservationStateRejected
		}
		d.setReservation(name, out)
	}
}

// neverGranted reports whether a request holds nothing yet: new, or
// rejected as a new request. Adoption (rule 7) applies only to such
// requests; the growth of a persisted replica is decided like any growth.
func neverGranted(prev dsv1.RequestStatus, hadPrev bool) bool {
	return !hadPrev || (prev.State == dsv1.RequestStateRejected && prev.ScheduledSize == 0)
}

// growth decides one request that asks for more than it holds. The bytes
// prev holds are already counted in d.used (holdUndecided). A new placement
// (placement) is refused on a disk that is not schedulable; growth of what
// is already placed here is judged on space alone, as Longhorn judges it
// (rule 8). A Longhorn write, which taker names ("" for a reservation),
// that fits what Longhorn counts on the disk takes the space of the
// reservations that yield to it (rule 6, yieldTo).
func (d *decider) growth(requested int64, prev dsv1.RequestStatus, hadPrev, placement bool, taker string) dsv1.RequestStatus {
	held := int64(0)
	if hadPrev {
		held = prev.ScheduledSize
	}
	reject := func(msg string) dsv1.RequestStatus { return d.reject(requested, held, msg) }
	if placement && !d.in.Disk.Schedulable {
		return reject(fmt.Sprintf("disk is not schedulable (%s): %s", d.in.Disk.Reason, d.in.Disk.Message))
	}
	if !d.room(requested-held, taker) {
		free := max(d.limit-d.used, 0)
		holding := d.reservationsHolding(requested - held)
		if held > 0 {
			return reject(fmt.Sprintf("expansion from %s to %s needs %s more, %s free of limit %s%s",
				Bytes(held), Bytes(requested), Bytes(requested-held), Bytes(free), Bytes(d.limit), holding))
		}
		return reject(fmt.Sprintf("requested %s, %s free of limit %s%s", Bytes(requested), Bytes(free), Bytes(d.limit), holding))
	}
	d.outcome.Granted++
	return dsv1.RequestStatus{State: dsv1.RequestStateScheduled, RequestedSize: requested, ScheduledSize: requested}
}

// room reports whether more bytes fit under the limit, once the
// reservations that yield to the Longhorn write taker ("" for none) are cut.
func (d *decider) room(more int64, taker string) bool {
	return Fits(d.used, more, d.limit) || (taker != "" && d.yieldTo(taker, more))
}

// reserved returns the bytes the granted reservations hold now.
func (d *decider) reserved() int64 {
	var n int64
	for _, st := range d.out.Reservations {
		if st.State == dsv1.ReservationStateScheduled {
			n = AddSat(n, st.ScheduledSize)
		}
	}
	return n
}

// yieldTo cuts, in the status being written, the granted reservations that
// yield (yields) so that a Longhorn write needing more bytes fits, and
// reports whether it now fits. A reservation never makes the gate refuse a
// Longhorn placement or growth that fits what Longhorn itself counts
// (rule 6): Longhorn cannot see reservations and keeps choosing the disk
// that looks emptiest to it. Nothing is cut when cutting every reservation
// that yields would not make room.
func (d *decider) yieldTo(taker string, more int64) bool {
	if !Fits(d.usedLess(d.reserved()), more, d.limit) {
		return false // Longhorn's own count does not hold it either
	}
	var cut []string
	var freed int64
	for _, volume := range sortedKeys(d.out.Reservations) {
		st := d.out.Reservations[volume]
		if st.State != dsv1.ReservationStateScheduled || st.ScheduledSize <= 0 || !d.yields(volume) {
			continue
		}
		cut = append(cut, volume)
		freed = AddSat(freed, st.ScheduledSize)
		if Fits(d.usedLess(freed), more, d.limit) {
			break
		}
	}
	if !Fits(d.usedLess(freed), more, d.limit) {
		return false
	}
	for _, volume := range cut {
		st := d.out.Reservations[volume]
		msg := fmt.Sprintf("yielded to %s, which fits what Longhorn counts on the disk: %s released; pod %s keeps its node, the volume's locality may be degraded",
			taker, Bytes(st.ScheduledSize), st.Pod)
		st.State, st.ScheduledSize, st.ExpiresAt, st.Message = dsv1.ReservationStateExpired, 0, nil, msg
		d.setReservation(volume, st)
		d.outcome.Released++
		d.outcome.Yielded = append(d.outcome.Yielded, Yield{Volume: volume, Pod: st.Pod, Message: msg})
	}
	return true
}

// yields reports whether the granted reservation of volume yields to a
// Longhorn write now (rule 6): a best-effort volume's at once; any other
// once its pod has been bound to this disk's node for ReservationTimeout.
// Before its pod is bound such a reservation is bounded by its expiresAt.
func (d *decider) yields(volume string) bool {
	if d.in.BestEffort[volume] {
		return true
	}
	pod := d.in.Pods[volume]
	if pod.State != PodBoundHere {
		return false
	}
	return pod.Since.IsZero() || !d.in.Now.Before(pod.Since.Add(d.in.ReservationTimeout))
}

// reservationsHolding says, for the refusal of more bytes that would fit
// what Longhorn counts, what the granted reservations that do not yield yet
// hold; otherwise "".
func (d *decider) reservationsHolding(more int64) string {
	if !Fits(d.usedLess(d.reserved()), more, d.limit) {
		return ""
	}
	var n int64
	for _, volume := range sortedKeys(d.out.Reservations) {
		if st := d.out.Reservations[volume]; st.State == dsv1.ReservationStateScheduled && !d.yields(volume) {
			n = AddSat(n, st.ScheduledSize)
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("; reservations that do not yield yet hold %s, each for at most %s before and %s after its pod is bound",
		Bytes(n), d.in.ReservationTimeout, d.in.ReservationTimeout)
}

// startedBy returns a replica granted on this disk whose volume starts from
// the backing image image (Input.ReplicaImages), or "": a copy of image is
// what that replica needs to start here.
func (d *decider) startedBy(image string) string {
	for _, replica := range sortedKeys(d.in.ReplicaImages) {
		if d.in.ReplicaImages[replica] != image {
			continue
		}
		if st, ok := d.out.Replicas[replica]; ok && st.State == dsv1.RequestStateScheduled && st.ScheduledSize > 0 {
			return replica
		}
	}
	return ""
}

// reject returns the rejection of a request of requested bytes that keeps
// the held bytes it was granted before.
func (d *decider) reject(requested, held int64, msg string) dsv1.RequestStatus {
	d.outcome.Rejected++
	return dsv1.RequestStatus{State: dsv1.RequestStateRejected, RequestedSize: requested, ScheduledSize: held, Message: msg}
}

// countReleased counts entries of the previous status that no longer hold
// space: removed from spec or garbage-collected.
func (d *decider) countReleased() {
	for _, k := range Kinds() {
		for name, prev := range d.previous(k) {
			if _, ok := d.decided(k)[name]; !ok && prev.ScheduledSize > 0 {
				d.outcome.Released++
			}
		}
	}
	for name, prev := range d.in.Previous.Reservations {
		if _, ok := d.out.Reservations[name]; !ok && prev.ScheduledSize > 0 {
			d.outcome.Released++
		}
	}
	for _, st := range d.out.Reservations {
		if st.State == dsv1.ReservationStateScheduled && st.ExpiresAt != nil &&
			(d.outcome.NextExpiry.IsZero() || st.ExpiresAt.Time.Before(d.outcome.NextExpiry)) {
			d.outcome.NextExpiry = st.ExpiresAt.Time
		}
	}
}

func (d *decider) setConditions() {
	ready := metav1.Condition{
		Type: dsv1.DiskScheduleConditionReady, Status: metav1.ConditionTrue,
		Reason: dsv1.DiskScheduleReasonSchedulable, Message: "new requests can be granted",
		ObservedGeneration: d.in.Generation,
	}
	if !d.in.Disk.Schedulable {
		ready.Status = metav1.ConditionFalse
		ready.Reason = d.in.Disk.Reason
		ready.Message = d.in.Disk.Message
	}
	over := metav1.Condition{
		Type: dsv1.DiskScheduleConditionOvercommitted, Status: metav1.ConditionFalse,
		Reason:             dsv1.DiskScheduleReasonWithinLimit,
		Message:            fmt.Sprintf("%s scheduled of limit %s", Bytes(d.used), Bytes(d.limit)),
		ObservedGeneration: d.in.Generation,
	}
	if d.used > d.limit {
		over.Status = metav1.ConditionTrue
		over.Reason = dsv1.DiskScheduleReasonAdoptedOverLimit
		over.Message = fmt.Sprintf("adopted replicas hold %s, over the limit %s; new growth is rejected until usage falls below it",
			Bytes(d.used), Bytes(d.limit))
	}
	now := metav1.NewTime(d.in.Now)
	for _, c := range []metav1.Condition{ready, over} {
		c.LastTransitionTime = now
		meta.SetStatusCondition(&d.out.Conditions, c)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Bytes formats a byte count for messages, in binary units ("100Gi").
func Bytes(n int64) string {
	return resource.NewQuantity(n, resource.BinarySI).String()
}
