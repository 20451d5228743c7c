// Package extender is the kube-scheduler extender. It keeps no capacity map
// of its own: it reads the DiskSchedule ledgers, packs all of a pod's new
// Longhorn volumes onto each candidate node's disks at once, keeps a
// restarted pod on the node that holds its replicas, and once kube-scheduler
// has chosen a node records the choice as reservations in that node's
// ledgers, holding later filters back until then so the next pod cannot be
// placed on the same space.
//
// It reads Longhorn's own Nodes, Volumes and Replicas (Longhorn's v1beta2
// API) and never writes them: its only writes are reservations in
// DiskSchedule specs and the EndpointSlice of its Service. It derives
// nothing from a ledger or a Longhorn node itself: free space is
// internal/ledger's reading (ledger.Free, ledger.HeldForPod) and node and
// disk eligibility is internal/placement's one rule (placement.NodeFailures,
// placement.DiskFailures). Its settings are the ConfigMap
// diskschedule-config, read on every call.
package extender
