// Package diskmonitor is the per-node disk monitor: it measures each disk in
// the Node's spec through a Source (statfs of the disk path on a real node, a
// static table in tests and the sandbox) and applies diskUUID, diskType,
// storageMaximum, storageAvailable and the disk Ready condition to the Node
// status under its own field manager.
package diskmonitor
