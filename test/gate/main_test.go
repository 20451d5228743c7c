// Package gate_test attacks the admission gate as Longhorn's volume
// controllers would: many writers place replicas from stale views of the
// disks at once, some of their admitted writes are lost, and managers stop
// mid-run. A watch of every Replica event checks that the bytes persisted on
// a disk never exceed its limit; after quiescence every ledger equals what
// is persisted. The same workload without the gate overfills a disk.
package gate_test
