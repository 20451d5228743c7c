// Package extender is the kube-scheduler extender. It keeps no capacity map
// of its own: it reads the DiskSchedule ledgers, packs all of a pod's new
// Longhorn volumes that need space on its node onto each candidate node's
// disks at once, keeps a restarted pod on the node that holds their
// replicas, and once kube-scheduler has chosen a node writes the choice as
// reservations in that node's ledgers.
//
// What a volume needs depends on its kind (DESIGN §6): Longhorn's
// spec.dataLocality and spec.numberOfReplicas, read from the Longhorn
// Volume of a bound claim, or from the StorageClass parameters dataLocality
// and numberOfReplicas of an unbound one as Longhorn's CSI driver reads
// them (missing: Longhorn v1.12's defaults, disabled and 3). One function,
// needsLocalSpace, tells the kinds apart, and the claims it rejects are
// dropped where they are resolved (resolver.localVolumes), so the filter,
// the prioritizer and the reservation writer never see them:
//
//   - strict-local and best-effort: one replica's space on the pod's node,
//     packed with the pod's other such volumes onto its disks and reserved
//     there; a node that cannot give it is removed with the numbers. Their
//     other numberOfReplicas − 1 replicas (less those already placed off
//     the node) need room elsewhere under Longhorn's anti-affinity rules:
//     roomElsewhere asks placement.Place for them, volume by volume,
//     against every Longhorn node's ledgers, and a node from which they
//     would find none is removed too. A strict-local volume whose replica
//     is on another node passes no other node: Longhorn never moves it.
//   - disabled (Longhorn's default StorageClass: 3 replicas, disabled):
//     nothing on the pod's node. Longhorn places its replicas wherever its
//     scheduler finds room and serves the pod over the network, so it
//     removes no node for lack of local space and gets no reservation;
//     whether the cluster can hold its replicas is Longhorn's business.
//
// The restart rule (a node that holds a replica of every volume is the
// only node returned, and scores highest) counts only the volumes that
// need local space: for them, another node means a new local replica to
// build. A pod whose Longhorn volumes are all disabled has no locality
// preference, as its operators expect from Longhorn (a disabled volume's
// replicas never follow its pod): every candidate passes, unscored, as for
// a pod without Longhorn volumes, and kube-scheduler spreads it as it would.
//
// Filters do not wait for each other. A pod let through counts, in the
// in-flight overlay, against every node it was offered (per disk, as packed
// there) until its node is known, then against that node alone until the
// ledgers show its reservations; a filter waits only when the pods in
// flight alone keep the pod off every node. The node is learned from
// events: the pod's binding, its claims' selected-node annotation, its
// nominated node, or kube-scheduler's call to /bind when the extender is
// its binder. Reservations are written with one merge patch per disk, with
// no resourceVersion precondition (only the extender writes them), and no
// wait for the decision: a pending request already counts as taken. The
// extender never renews a reservation: the ledger holds a granted one while
// its pod is bound to the node and the volume's replica is not there yet
// (DESIGN rule 6). A reservation that expired before the ledger saw its pod
// bound there is counted in flight again at once and written anew: under
// the ledger's event that shows it expired when the pod is bound already,
// under the pod's binding event when it expired first (kube-scheduler's
// volume binding outlasted the node-reservation timeout). A reservation a
// pod's Bind could not write yet (the ledger still showing its decision on
// an earlier one of the volume) is the writer's once the pod is bound.
//
// The decision is a pure evaluator, as a filter and a score are in
// TopoLVM's extender: evaluate takes a snapshot (the view of nodes and
// ledgers, and what the pods in flight claim per disk) and a pod's volumes,
// and returns a verdict per node (fit: whether they fit, packed onto which
// disks, with what left free, and the packing search's steps), reading
// nothing else. One type, flight, is the bookkeeper of the pods in flight
// and the reservations written: it keeps the view from informer events
// under the same lock as the overlay, so an entry drops only once the view
// shows what replaces it, hands out snapshots that no later event changes
// (copy on write), and records a pod let through only if the pods in
// flight claim no more on the disks it was packed onto than its snapshot
// showed; otherwise the Extender evaluates again. So filters of different
// pods evaluate at once, outside that lock, and two pods never get the
// same bytes. flight reads nothing of the cluster: the Extender reads the
// cache (a pod's volumes, the pods still waiting for an expired
// reservation) before it calls it. A disk's reservations are written as
// planReservations plans them from the ledger as read, by one executor
// (writeDisk). A new leader that takes over from another answers no filter
// for a fence, then rebuilds the overlay from the pods that got a node
// meanwhile.
//
// It reads Longhorn's own Nodes, Volumes and Replicas (Longhorn's v1beta2
// API) and never writes them: its only writes are reservations in
// DiskSchedule specs, pod Bindings when it is kube-scheduler's binder, and
// the EndpointSlice of its Service. It derives nothing from a ledger or a
// Longhorn node itself: free space is internal/ledger's reading
// (ledger.RoomOf and ledger.ReservationOf) and node and disk
// eligibility is internal/placement's one rule (placement.NodeFailures,
// placement.DiskFailuresForVolume). Its settings are Longhorn's Setting
// objects and its own keys of the ConfigMap diskschedule-config, which it
// reads from the config controller's Store (internal/controller/config),
// both on every call.
package extender
