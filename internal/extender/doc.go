// Package extender is the kube-scheduler extender. It keeps no capacity map
// of its own: it reads the DiskSchedule ledgers, packs all of a pod's new
// Longhorn volumes onto each candidate node's disks at once, keeps a
// restarted pod on the node that holds its replicas, and once kube-scheduler
// has chosen a node records the choice as reservations in that node's
// ledgers, holding later filters back until then so the next pod cannot be
// placed on the same space.
package extender
