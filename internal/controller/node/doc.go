// Package node is the Longhorn Node controller. It keeps one DiskSchedule per
// disk the disk monitor has found (named by the disk's UUID, owned by the
// Node), derives the node's Ready and Schedulable conditions from the
// Kubernetes node, each disk's Schedulable condition from the actual-space
// check, and mirrors each ledger's allocations into the Node status for
// Longhorn compatibility.
package node
