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
// PodServices serves, on the IP of each running pod Longhorn creates for
// them (the sandbox's kubelet gives each its own), until the pod goes:
//
//   - a backing-image manager (BackingImageManager, gRPC, port 8000, on
//     the module's generated bimrpc definitions; API version 3, that of
//     backing-image-manager v1.12): Fetch takes an image's first file over
//     from the data source at the address it is given (its sizes and
//     checksum read from the data source, which is then asked to
//     transfer), Sync copies a file from the manager at the address it is
//     given (reading it there with Get), each file ready at once; Get,
//     List, Delete and Watch (a message on every change) answer from the
//     files held; VersionGet answers the API version;
//   - a backing-image data source (DataSource, HTTP, port 8000, what
//     bimclient.DataSourceClient calls): GET /v1/file reports the file,
//     POST /v1/file?action=transfer marks it taken over (ready). The file
//     is read from the pod's command line (--name, --uuid, --source-type,
//     --checksum, --parameters): a download, restore, clone or export is
//     ready for transfer at once, at the size its size parameter declares
//     (SourceParamSize, a quantity; an export's volume-size; otherwise
//     DefaultBackingImageSize), its real size SourceParamRealSize or the
//     size;
//   - a share manager (ShareManager, longhorn-share-manager v1.12's daemon
//     in the pod Longhorn's share manager controller creates for an RWX
//     volume: gRPC on port 9600, on the module's generated smrpc
//     definitions and gRPC health): it looks for its volume's block device
//     on its node (an engine of the volume running on the node's instance
//     manager with its block-device frontend started: BlockDevices) at its
//     start and every ShareManagerDeviceCheckInterval (5 s), as the daemon
//     does, and once it is there holds the volume exported and its NFS
//     server listening on NFSPort (2049) on the pod's IP, where the
//     sandbox's kubelet probes it for the pod's readiness (the pod's own
//     probe, cat /var/run/ganesha.pid, passes once NFS-Ganesha runs). It
//     answers what longhorn-manager calls: Mount and Unmount (its share
//     manager controller; nothing before the NFS server runs), the health
//     check (serving while exported: its Kubernetes pod controller's
//     IsServing), FilesystemTrim (its API) and FilesystemResize (its CSI
//     node server), both refused as the daemon refuses them without the
//     device or the mount, and doing nothing otherwise.
//
// A node going down is its instance manager stopping (Listeners.Stop): its
// ports refuse connections from then on, and the engines of the other
// instance managers on its Network find the replicas it ran in error (in
// their next replica list) and cannot add them, as longhorn-engine finds a
// replica whose connection failed. Nothing is written to the API server:
// longhorn-manager finds the node down through Kubernetes, as it does when
// a node dies.
//
// What it does not: no data is stored or moved (no block device, no
// snapshot, backup, restore or clone does anything; no NFS is served on a
// share manager's NFS port, which accepts connections and closes them,
// nothing is mounted, formatted, encrypted, trimmed or resized, and a
// share manager takes no lease for RWX fast failover; no backing-image file
// is downloaded, written, uploaded, exported or checksummed, and a file's
// checksum is made up from its name, UUID and size unless one is
// expected), the v2 (SPDK) data engine is refused, the backing-image
// manager refuses PrepareDownload, Send and backups and its files never
// fail, a data source of type upload stays pending (nothing is uploaded),
// an instance never fails on its own, a share manager's export never fails
// on its own (its device going away does not end it, where the daemon's
// health check would end the pod), and a stopped instance manager does
// not come back.
package dataplane
