// Package extender is the kube-scheduler extender. It keeps no capacity map
// of its own: it reads the DiskSchedule ledgers, packs all of a pod's new
// Longhorn volumes onto each candidate node's disks at once, keeps a
// restarted pod on the node that holds its replicas, and once kube-scheduler
// has chosen a node writes the choice as reservations in that node's
// ledgers.
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
// wait for the decision: a pending request already counts as taken. A
// granted reservation is renewed before it expires while its pod, bound to
// the node, still waits for Longhorn to place the volume's replica there:
// in the disk's next write of a new reservation once it has lived a fifth
// of the timeout, or in a write of its own within 3/5 of expiring.
// The view of nodes and ledgers the filter reads is kept from informer
// events under the same lock as the overlay, so an entry drops only once
// the view shows what replaces it. A new leader that takes over from
// another answers no filter for a fence, then rebuilds the overlay from the
// pods that got a node meanwhile.
//
// It reads Longhorn's own Nodes, Volumes and Replicas (Longhorn's v1beta2
// API) and never writes them: its only writes are reservations in
// DiskSchedule specs, pod Bindings when it is kube-scheduler's binder, and
// the EndpointSlice of its Service. It derives nothing from a ledger or a
// Longhorn node itself: free space is internal/ledger's reading
// (ledger.Free, ledger.HeldByPod, ledger.ReservationOf) and node and disk
// eligibility is internal/placement's one rule (placement.NodeFailures,
// placement.DiskFailures). Its settings are the ConfigMap
// diskschedule-config, read on every call.
package extender
