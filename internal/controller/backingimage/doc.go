// Package backingimage is the BackingImage controller. It keeps
// spec.minNumberOfCopies copies of every backing image whose size is known,
// each on its own eligible disk (node and disk selectors, scheduling flags,
// conditions) and each through that disk's ledger: the chosen disk is first
// recorded in spec.diskFileSpecMap, then the image's request of status.size
// bytes is written to the disk's DiskSchedule. The ledger's decision is read
// back: a grant makes the copy ready, a rejection removes the disk from
// spec.diskFileSpecMap, releases the request and places the copy elsewhere.
// On deletion every ledger request of the image is released before the
// finalizer is removed.
//
// diskFileSpecMap is the intent and the ledgers follow it: a ledger request
// exists only for a disk in the map (requests of disks no longer in it are
// released), so the map is always read from the API server, never the cache.
package backingimage
