// Package node is the node controller. It keeps one DiskSchedule per disk
// UUID in each Longhorn Node's status.diskStatus (named by the UUID, labelled
// and owned by the Node) and deletes the ledger of a disk that left the
// Node once it grants nothing; while it still grants space it is kept, with
// a Warning Event. It reads Longhorn's Nodes and never writes them: the
// ledger's totals live on the DiskSchedules only.
//
// A DiskSchedule named by a disk's UUID whose spec.nodeID or spec.name is
// not where Longhorn reports that UUID (written by hand, or left from a
// disk that moved or was renamed) would have the disk's requests decided
// against a disk that is not there, and refused: it must not block the
// disk. As both fields are immutable, it is replaced, with a Warning Event
// (DiskScheduleMismatch) and a log line: deleted at the resourceVersion
// read, so a request written meanwhile fails the delete and is looked at
// again, then created for the right node and disk with every request of
// its spec carried over. Its decisions are not carried: the DiskSchedule
// controller decides the requests again, and adopts what Longhorn has
// persisted on the disk even over the limit (rule 7), so the ledger never
// loses track of space Longhorn uses there; the mirror releases requests
// Longhorn did not persist there (rule 10). A DiskSchedule whose own node
// reports its UUID under its disk name (one UUID reported for two disks,
// which Longhorn marks not ready) matches a real disk and is left alone.
package node
