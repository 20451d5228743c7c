// Package node is the node controller. It keeps one DiskSchedule per disk
// UUID in each Longhorn Node's status.diskStatus (named by the UUID, labelled
// and owned by the Node) and deletes the ledger of a disk that left the
// Node once it grants nothing; while it still grants space it is kept, with
// a Warning Event. It reads Longhorn's Nodes and never writes them: the
// ledger's totals live on the DiskSchedules only.
package node
