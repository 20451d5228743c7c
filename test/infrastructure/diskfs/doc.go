// Package diskfs mounts one of the sandbox's disks: a FUSE filesystem
// (github.com/hanwen/go-fuse/v2) of a given size whose statfs counts, as
// used, the bytes the simulated data plane holds on the disk (counted, not
// stored) beside the bytes of the real files on it, so that Longhorn's own
// disk monitor, which reads a disk with statfs (go-common-libs'
// io.GetDiskStat: storageMaximum is f_blocks × f_bsize, storageAvailable
// f_bfree × f_bsize), sees a disk fill as its replicas write.
//
// The files and directories written to the disk (Longhorn's
// longhorn-disk.cfg, its replicas/ and backing-images/ directories) are
// real: the filesystem is go-fuse's loopback over a small tmpfs mounted
// at the same directory first, which the FUSE mount then covers, so that
// nothing but the FUSE filesystem reaches it. Nothing of the bytes the
// data plane counts is stored, so the machine's memory and disk use stay
// independent of them.
//
// Mounting needs CAP_SYS_ADMIN and /dev/fuse; the mount is made with
// mount(2) directly (no fusermount). The caller chooses the mount
// namespace: in the sandbox, sandbox-longhorn's own, so that every disk
// goes with the process however it ends.
package diskfs
