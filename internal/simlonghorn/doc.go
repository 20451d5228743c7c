// Package simlonghorn is a simulated Longhorn v1.12 for the sandbox, tests
// and the demo: it plays longhorn-manager and the pieces of a cluster's
// nodes that Longhorn relies on, writing Longhorn's own kinds with Longhorn's
// own Go types, as Longhorn does. None of it runs in a real deployment, where
// an unmodified Longhorn does the same work. It never reads a DiskSchedule:
// Longhorn does not know the ledger.
//
// # Longhorn's own code and what is simulated
//
// Replica placement is Longhorn v1.12.0's own code, imported from the
// longhorn-manager module (never copied):
//
//   - managerpod.go: Options.ManagerPods (DefaultManagerPods) simulated
//     longhorn-manager pods, each with its own datastore.DataStore (its own
//     informers on the API server, so each pod's view of the disks is as
//     stale as a real pod's) and its own scheduler.ReplicaScheduler. A
//     volume belongs to the pod of its status.ownerID (the node it is
//     attached to, else its current owner, else a node chosen by its name),
//     as Longhorn's volume controllers share volumes between nodes.
//   - volume_plan.go: unscheduled replicas are placed with the owner's
//     ReplicaScheduler.ScheduleReplica, a failed replica is reused when its
//     CheckAndReuseFailedReplica says so, and best-effort data locality's
//     local replica is created only when its FindDiskCandidates finds a disk
//     on the attached node; volume.go writes replicas with the owner's
//     datastore.UpdateReplica, and a refused write is retried as
//     longhorn-manager's queue does (three quick retries with its 5 ms
//     doubling backoff, then the 30 s resync or a node change).
//   - backingimage.go: a backing image's next copy goes to the disk the
//     datastore's GetReadyNodeDiskForBackingImage picks.
//   - instances.go: what Longhorn's scheduler requires of a node: its
//     running default instance manager (the default-instance-manager-image
//     Setting, an all-in-one InstanceManager with Longhorn's labels) and the
//     engine image deployed there (EngineImage state deployed,
//     nodeDeploymentMap), named and labelled with Longhorn's types package.
//
// Longhorn's controllers themselves (package controller) do not build
// outside longhorn-manager: their engine, instance-manager and
// backing-image-manager client modules are not published. Everything below
// that places nothing is therefore simulated, following Longhorn's source:
// the node controller's disk accounting, the volume controller's replica
// life cycle around the scheduler (create, follow, clean up, status), the
// data plane (instance managers that run replicas, engines, rebuilds,
// backing-image files), the CSI driver and the kubelets.
//
// What it plays, one file per part:
//
//   - bootstrap.go: what longhorn-manager creates at start: the default
//     scheduling Settings (only those missing), each simulated node's
//     Kubernetes Node (as its kubelet registers it) and Longhorn Node with
//     its disks.
//   - node.go: Longhorn's node controller and disk monitor: each Longhorn
//     Node's Ready and Schedulable conditions (cordon-aware), zone and
//     region, and per disk its UUID, size, storageScheduled and
//     scheduledReplica (the volumeSize of every replica whose spec.diskID is
//     the disk, plus the backing images copied there) and its Ready and
//     Schedulable conditions (DiskPressure).
//   - setting.go: Longhorn's setting controller, which marks Settings applied.
//   - kubelet.go, nodelease.go: each simulated node's kubelet: the
//     Kubernetes Node Ready with its allocatable resources (including the
//     scheduler extender's resource), reported again every 5 minutes; the
//     node's Lease in kube-node-lease renewed every quarter of its duration
//     (Options.NodeLeaseDuration, 40s by default) by the kubelet's own lease
//     controller, so kube-controller-manager's node lifecycle controller
//     keeps the node Ready and untainted; pods Running once their Longhorn
//     volumes are attached to their node and have a running replica (with
//     Options.LonghornControllers, an RWX volume that is not migratable
//     once it is attached on its share manager's node and its share
//     manager runs with its endpoint set, as Longhorn's CSI node server
//     waits for before it mounts the share); and the end of pod
//     deletion. With Options.NodeIPs a pod gets its node's IP, except
//     Longhorn's backing-image manager, data source and share manager pods,
//     which get one of their own from the top of the nodes' /24 (pods.go),
//     and a pod with a TCP readiness probe is ready once its port answers
//     on its IP; a share manager pod's probe (cat /var/run/ganesha.pid,
//     true once NFS-Ganesha runs) is run as a TCP probe of its NFS port
//     (2049), where the simulated share manager (internal/dataplane)
//     listens once its NFS server runs. The kubelet of a node that went down (Options.Outages,
//     outage.go) does none of this any more, so node lifecycle marks the
//     node NotReady as for a node that died.
//   - provisioner.go: the Longhorn CSI driver behind the CSI
//     external-provisioner, built on sig-storage-lib-external-provisioner:
//     a claim kube-controller-manager's PV controller hands to
//     driver.longhorn.io (Immediate, or WaitForFirstConsumer once
//     kube-scheduler selected a node) becomes a Longhorn Volume and a
//     PersistentVolume, which the PV controller binds (the storage
//     capacity of capacity.go is refreshed after each); a Released
//     PersistentVolume of reclaim policy Delete loses its Volume, then goes.
//     With Options.LonghornAPI (provisioner_api.go) the Volume is created
//     and deleted as Longhorn v1.12.0's CSI driver does it (CreateVolume,
//     DeleteVolume, csi/controller_server.go), through Longhorn's API with
//     Longhorn's own client: Volume.Create with what the driver sends for
//     the claim and its class (getVolumeOptions, csi/util.go): the size in
//     bytes (at least 10 MiB, rounded up to 2 MiB), numberOfReplicas,
//     dataLocality, the access mode (rwx for a ReadWriteMany claim, rwop
//     for ReadWriteOncePod), migratable (only with rwx), backingImage
//     (checked, or created from the class's data source, as the driver
//     does), the disk and node selectors, frontend, dataEngine and the
//     rest of Longhorn's class parameters; Longhorn's VolumeManager.Create
//     (its checks: a selector's tag must exist on some disk or node) and
//     its webhooks (Longhorn's defaults) make the Volume, and the
//     PersistentVolume has the size Longhorn answered. As the driver, it
//     waits for the volume to leave the creating state, and after
//     Volume.Delete for it to be gone, asking every 250 ms where the
//     driver asks every 2 s. A refusal is the provisioner's error as the
//     driver answers it, a gRPC status with Longhorn's message (Internal;
//     InvalidArgument for parameters the driver refuses, which the
//     external provisioner retries slowly), which the external
//     provisioner records as a ProvisioningFailed Event and retries.
//     Without Longhorn's API the Volume VolumeFor returns is written
//     directly. Binding, releasing and the protection finalizers are
//     kube-controller-manager's: without its volume controllers no claim is
//     provisioned.
//   - capacity.go: storage capacity tracking as Longhorn v1.12 does it.
//     longhorn-manager's part: the csi-provisioner Deployment (no
//     replicas: its external-provisioner runs here) and the CSIDriver
//     driver.longhorn.io with storageCapacity equal to the
//     csi-storage-capacity-tracking setting. The kubelets' part: each
//     node's CSINode registers the driver with the topology keys of
//     Longhorn's NodeGetInfo (the hostname and zone). The
//     external-provisioner's part is the external-provisioner's own code
//     (github.com/kubernetes-csi/external-provisioner/v6/pkg/capacity,
//     v6.3.0, the release built on the k8s.io modules v0.36 that this
//     module pins at v0.36.3; v6.4.0 needs v0.37 and controller-runtime
//     v0.25, and the module proxy serves no v5): one CSIStorageCapacity per node
//     and WaitForFirstConsumer class, refreshed every
//     Options.CapacityPollInterval (1m, --capacity-poll-interval's default)
//     and for the class after each volume provisioned. The capacities are
//     Longhorn's GetCapacity (csi/controller_server.go) over the Longhorn
//     Node's disk status and settings: NodeCapacity follows its formula,
//     with Longhorn's own condition and tag helpers, because Longhorn's
//     csi package does not build here (its engineapi needs Longhorn's
//     engine, instance-manager, share-manager, backing-image-manager and
//     backupstore modules at versions the module proxy does not serve).
//     The numbers lag as in a cluster: a volume counts on a node only once
//     Longhorn placed its replica and the node controller wrote the disk's
//     storageScheduled, after the refresh its provisioning triggered.
//   - resizer.go: the CSI external-resizer with the driver's
//     ControllerExpandVolume and the kubelet's node expansion: a bound claim
//     asking for more (which kube-controller-manager's expander leaves to an
//     external resizer) grows its Volume's spec.size, then, once the
//     replicas have the size, its PersistentVolume and the claim. The
//     Volume is grown as Longhorn's API grows it: Longhorn v1.12.0's own
//     ReplicaScheduler.CheckReplicasSizeExpansion first, over the owning
//     longhorn-manager pod's datastore, then the Update. The claim
//     carries the external resizer's RecoverVolumeExpansionFailure status
//     (GA since Kubernetes 1.34): the Resizing condition,
//     status.allocatedResources and allocatedResourceStatuses[storage]
//     ControllerResizeInProgress while it expands, all cleared but
//     allocatedResources once it is expanded. A refused check or Volume
//     update is answered as Longhorn v1.12.0's
//     ControllerExpandVolume answers it
//     (csi/controller_server.go): OutOfRange when the error's message
//     matches Longhorn's own expression "failed to schedule .* more bytes
//     to disk" (the gate's refusal of a growth the disk can never hold;
//     Longhorn's own "cannot schedule … more bytes" does not match),
//     Internal otherwise (ControllerExpandError). Either
//     way the claim gets a Warning Event VolumeResizeFailed with the
//     refusal's message, as the external resizer writes it ("resize volume
//     … failed: rpc error: code = … desc = …"), and the
//     ControllerResizeError condition. OutOfRange, InvalidArgument and
//     NotFound are infeasible to the external resizer: the claim is marked
//     ControllerResizeInfeasible and that size is not tried again until
//     the claim's request changes, or InfeasibleRetry (5 minutes, the
//     external resizer's slow-set retention, --retry-interval-max) has
//     passed; lowering the request, which Kubernetes allows down to just
//     above status.capacity once an expansion failed, expands to the lower
//     size. Any other refusal is retried with the controller's backoff.
//   - attacher.go: the CSI attacher with Longhorn's volume-attachment
//     controller: a volume is attached to the node of the pod using it.
//   - volume*.go: Longhorn's volume controller: replicas created
//     unscheduled, then placed by Longhorn's own scheduler of the owning
//     longhorn-manager pod (above) and written with its datastore's
//     UpdateReplica. A refused write leaves the replica unscheduled, reports
//     Scheduled=False with the refusal, and is retried as Longhorn retries.
//     Expansion, best-effort data locality (a local replica only when
//     Longhorn's scheduler finds a disk there, then the remote one removed)
//     and strict-local pinning are as Longhorn v1.12 does them.
//   - replica.go: the instance managers: a scheduled replica of an attached
//     volume runs; replicas of deleted volumes are removed, as the garbage
//     collector does through their owner references.
//   - backingimage.go: Longhorn's backing-image controller and managers:
//     status.size from the declared source size (source parameter size),
//     status.realSize from the declared real size (source parameter
//     realSize, the size when absent), copies on
//     minNumberOfCopies disks (chosen by Longhorn's datastore) and on each
//     disk a replica using the image is placed on, each copy ready at once.
//
// With Options.PlaceReplicas false (the sandbox's --simulated-longhorn=false)
// only the nodes, their disks' status, the Settings and the kubelets run:
// nothing provisions volumes or creates and places replicas.
//
// Where it deviates from Longhorn v1.12, it does so to stay simple and
// deterministic: no engines or volume attachments exist as objects, and the
// instance managers and engine image never change state; disks are as free as they are large; a new replica of an
// attached volume runs at once; a best-effort local replica is created only
// when a disk on the attached node can take it (v1.12 creates it pinned and
// lets it fail to schedule) and a Warning Event (LocalReplicaSkipped) says
// when none can, where Longhorn only logs it; the resizer reacts at once to
// a claim whose request went down after an infeasible expansion, where the
// external resizer sees it at its next resync or slow retry, and it
// finishes an expansion without the FileSystemResizePending step of the
// kubelet's node expansion; volumes carry no longhorn.io finalizer (the simulation deletes a deleted
// volume's replicas itself) and no status.kubernetesStatus. The simulation
// runs with administrator credentials and carries no RBAC markers.
package simlonghorn
