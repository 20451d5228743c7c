// Package simcluster is the simulated cluster around Longhorn in the
// sandbox: the nodes, their kubelets, and the CSI sidecars of Longhorn's CSI
// driver that run beside kube-controller-manager (the external-provisioner,
// its storage capacity tracking, the external-resizer: CSISidecars, which
// run in a process of their own, cmd/sandbox-csi), which call Longhorn's
// own CSI controller server in sandbox-longhorn. Longhorn itself is
// longhorn-manager v1.12.0's own control plane (test/infrastructure/longhornmanager,
// run by cmd/sandbox-longhorn) on the simulated data plane
// (test/infrastructure/dataplane); nothing here places, attaches, starts or rebuilds
// replicas, and nothing here keeps a Longhorn Node's status. None of it runs
// in a real deployment. It never reads a DiskSchedule: Longhorn does not
// know the ledger.
//
// What it plays, one file per part:
//
//   - bootstrap.go, instances.go: what a cluster holds before
//     longhorn-manager's controllers start: Longhorn's default scheduling
//     Settings (only those missing) and its default engine and instance
//     manager image Settings; each node's Kubernetes Node, as its kubelet
//     registers it; each Longhorn Node with the topology's disks in its
//     spec, as an operator configures them (Longhorn's own node controller
//     then writes its status from the disks it finds); and the engine image,
//     deployed on every node, since Longhorn's engine image controller runs
//     the engine binary from the host's /engine-binaries.
//   - setting.go: Longhorn's setting controller's mark that a Setting is
//     applied.
//   - kubelet.go, nodelease.go, pods.go: each node's kubelet: the Kubernetes
//     Node Ready with its allocatable resources (including the scheduler
//     extender's resource), reported again every 5 minutes; the node's
//     Lease in kube-node-lease renewed every quarter of its duration
//     (Options.NodeLeaseDuration, 40s by default), so kube-controller-
//     manager's node lifecycle controller keeps the node Ready and
//     untainted; pods Running once their Longhorn volumes are attached to
//     their node with a running replica, or, for an RWX volume that is not
//     migratable, once it is attached on its share manager's node and its
//     share manager runs with its endpoint set, as Longhorn's CSI node
//     server waits for before it mounts the share; and the end of pod
//     deletion. A pod gets its node's IP (Options.NodeIPs, where the data
//     plane serves the node's instance manager), except Longhorn's
//     backing-image manager, data source and share manager pods, which get
//     one of their own from the top of the nodes' /24; a pod with a TCP
//     readiness probe is ready once its port answers on its IP, and a share
//     manager pod's probe (cat /var/run/ganesha.pid) is run as a TCP probe
//     of its NFS port (2049), where the data plane's share manager listens
//     once its NFS server runs. The kubelet of a node that went down
//     (Options.Outages, outage.go) does none of this any more, so node
//     lifecycle marks the node NotReady as for a node that died.
//   - provisioner.go: the CSI external-provisioner, built on
//     sig-storage-lib-external-provisioner, in front of Longhorn v1.12.0's
//     own CSI controller server (csi.NewControllerServer, unmodified),
//     which sandbox-longhorn serves on a Unix socket
//     (CSISidecarOptions.CSIEndpoint; csiclient.go is the connection;
//     sidecars.go makes and runs the sidecars, the provision controller
//     first: sig-storage-lib-external-provisioner registers Kubernetes'
//     core types in client-go's global scheme as it makes one, which no
//     other goroutine may read meanwhile): a claim kube-controller-manager's
//     PV controller hands to driver.longhorn.io (Immediate, or
//     WaitForFirstConsumer once kube-scheduler selected a node) becomes a
//     Longhorn Volume and a PersistentVolume, which the PV controller binds
//     (the storage capacity of capacity.go is refreshed after each); a
//     Released PersistentVolume of reclaim policy Delete loses its Volume,
//     then goes. Provision calls CreateVolume as the external-provisioner
//     does: the PersistentVolume's name (pvc-<claim UID>), the claim's
//     request as the required bytes, one capability per access mode of the
//     claim (mount, with the class's fstype or ext4 and its mount options,
//     or block; the access mode as csi-lib-utils maps it, ReadWriteOnce as
//     SINGLE_NODE_MULTI_WRITER since Longhorn's driver advertises it), and
//     the class's parameters without the csi.storage.k8s.io/ ones; the
//     PersistentVolume has the answer's volume ID as its handle, its
//     capacity and its volume context as the attributes (with the
//     provisioner's identity). Longhorn's driver does the rest, in its own
//     code: the size (at least 10 MiB, rounded up to 2 MiB), its
//     getVolumeOptions over the parameters, the backing image checked or
//     created, Volume.Create through Longhorn's REST API (Longhorn's
//     VolumeManager.Create and webhooks check it and fill in Longhorn's
//     defaults), and the wait for the volume to leave creating. Delete
//     calls DeleteVolume, which deletes the volume through the API and
//     waits until it is gone. A refusal is the driver's gRPC status with
//     Longhorn's message, which the external provisioner records as a
//     ProvisioningFailed Event and retries, in the state its checkError
//     gives the code (provisioningState). No accessibility requirements
//     are sent: Longhorn keeps none of them unless the
//     csi-allowed-topology-keys setting names keys (empty by default),
//     and the PersistentVolumes carry no node affinity. Binding, releasing
//     and the protection finalizers are kube-controller-manager's.
//   - capacity.go: storage capacity tracking as Longhorn v1.12 does it.
//     longhorn-manager's part: the csi-provisioner Deployment (no replicas:
//     its external-provisioner runs in sandbox-csi) and the CSIDriver
//     driver.longhorn.io with storageCapacity equal to the
//     csi-storage-capacity-tracking setting. The kubelets' part: each
//     node's CSINode registers the driver with the topology keys of
//     Longhorn's NodeGetInfo (the hostname and zone). The
//     external-provisioner's part is the external-provisioner's own code
//     (github.com/kubernetes-csi/external-provisioner/v6/pkg/capacity,
//     v6.3.0, the release built on the k8s.io modules v0.36 that this module
//     pins at v0.36.3; v6.4.0 needs v0.37 and controller-runtime v0.25): one
//     CSIStorageCapacity per node and WaitForFirstConsumer class, refreshed
//     every CSISidecarOptions.CapacityPollInterval (1m, --capacity-poll-interval's
//     default) and for the class after each volume provisioned. The
//     capacities are Longhorn's GetCapacity (csi/controller_server.go) over
//     the Longhorn Node's disk status and settings: NodeCapacity follows its
//     formula, with Longhorn's own condition and tag helpers. The numbers
//     lag as in a cluster: a volume counts on a node only once Longhorn
//     placed its replica and its node controller wrote the disk's
//     storageScheduled, after the refresh its provisioning triggered.
//   - resizer.go: the CSI external-resizer, calling Longhorn v1.12.0's own
//     ControllerExpandVolume over the same socket, and the kubelet's node
//     expansion: a bound claim asking for more (which
//     kube-controller-manager's expander leaves to an external resizer) is
//     expanded to its request with the PersistentVolume's capability (its
//     access modes, volume mode, fsType and mount options); Longhorn's
//     driver expands the volume through Longhorn's REST API (its own
//     VolumeManager.Expand checks, then the volume's update, where the gate
//     decides) and answers once the engine has the size; the
//     PersistentVolume and the claim then get the capacity it answered.
//     The claim carries the external resizer's
//     RecoverVolumeExpansionFailure status (GA since Kubernetes 1.34): the
//     Resizing condition, status.allocatedResources and
//     allocatedResourceStatuses[storage] ControllerResizeInProgress while it
//     expands, all cleared but allocatedResources once it is expanded. A
//     refusal is Longhorn's driver's answer: OutOfRange when the error's
//     message matches its expression "failed to schedule .* more bytes to
//     disk" (the gate's refusal of a growth the disk can never hold;
//     Longhorn's own "cannot schedule … more bytes" does not match),
//     Internal otherwise. Either way the claim gets a Warning Event VolumeResizeFailed with the refusal's message, as the
//     external resizer writes it ("resize volume … failed: rpc error: code
//     = … desc = …"), and the ControllerResizeError condition. OutOfRange,
//     InvalidArgument and NotFound are infeasible to the external resizer:
//     the claim is marked ControllerResizeInfeasible and that size is not
//     tried again until the claim's request changes, or InfeasibleRetry (5
//     minutes, the external resizer's slow-set retention,
//     --retry-interval-max) has passed; lowering the request, which
//     Kubernetes allows down to just above status.capacity once an
//     expansion failed, expands to the lower size. Any other refusal is
//     retried with the controller's backoff.
//
// With Options.CSI false (the sandbox's --simulated-longhorn=false) only the
// nodes, the Settings and the kubelets run: nothing provisions volumes.
//
// Where it deviates from a cluster, it does so to stay simple and
// deterministic: the engine image never changes state; the resizer reacts
// at once to a claim whose request went down after an infeasible
// expansion, where the external resizer sees it at its next resync or slow
// retry, and it finishes an expansion without the FileSystemResizePending
// step of the kubelet's node expansion. It runs with administrator
// credentials and carries no RBAC markers.
package simcluster
