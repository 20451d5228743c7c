// Package dataplane is the sandbox's Longhorn data plane, simulated at the
// API longhorn-manager reaches it through: per node, an instance manager
// serving the gRPC services of longhorn-instance-manager v1.12 on its pod's
// IP (a loopback address of 127.0.0.0/8 here), built on the service
// definitions Longhorn generates (github.com/longhorn/types imrpc,
// enginerpc), so Longhorn's own clients (engineapi, imclient) talk to it
// unmodified.
//
// What it answers:
//
//   - the instance service (port 8503) and, for a client that has not yet
//     read the API version, the process manager's version and health
//     (8500): instances (engines and replicas of the v1 data engine) are
//     created running at once, with ports from the instance manager's
//     range, listed, got, replaced, deleted and watched;
//   - the engine proxy (8501): an engine answers from the replicas it was
//     started with (each in mode RW), a replica added is rebuilt at once
//     (RW when ReplicaAdd returns), one removed is gone; the volume's size
//     is the engine's --size until VolumeExpand sets a new one; its
//     frontend starts with it when it is started with replicas, as
//     longhorn-engine's controller starts it, or on request; the snapshot
//     chain is the volume head alone; purge, clone, rebuild and restore
//     have nothing in progress. A live migration asks nothing more: its
//     engine on the target node is an engine started with the migration
//     replicas, each an instance of its own in the disk and data directory
//     of a replica of the volume (no data is kept, so a shared directory is
//     nothing to the instance manager);
//   - the disk service (8502): its version and health, for the v1
//     filesystem disks Longhorn reads with statfs itself.
//
// What it does not: no data is stored or moved (no block device, no
// snapshot, backup, restore or clone does anything), the v2 (SPDK) data
// engine is refused, and an instance never fails: a node going down is the
// sandbox stopping that node's instance manager.
package dataplane
