// Package diskschedule is the DiskSchedule controller, the only writer of
// DiskSchedule status. It reads each ledger's spec, the disk's facts from the
// Node and the settings, asks the pure ledger.Decide for the next status and
// writes it with the resourceVersion it read, so a decision computed from a
// stale view fails with a conflict and is made again.
package diskschedule
