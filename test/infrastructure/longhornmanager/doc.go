// Package longhornmanager runs longhorn-manager v1.12.0's own control plane
// in the sandbox, imported from its module and not modified: per sandbox
// node one longhorn-manager (its own datastore, informers and controller ID,
// the node's name), running Longhorn's volume, replica and engine
// controllers (controller.NewVolumeController, NewReplicaController,
// NewEngineController) with Longhorn's own work queues, backoff, ownership
// and resyncs; with the simulated data plane (Options.DataPlane) also its
// node, instance manager, volume attachment, rebuilding, eviction and
// expansion controllers, its backing image, backing image manager and
// backing image data source controllers, its share manager controller,
// and its Kubernetes PV, node and pod controllers; or, with Options.NodesOnly, its node, instance manager
// and Kubernetes node controllers alone (NodeControllers: Longhorn's Nodes,
// disks and instance managers, while a test's own writers place replicas);
// Longhorn's REST API (its api package over manager.VolumeManager);
// Longhorn's CSI Identity and Controller services (csi.NewIdentityServer,
// csi.NewControllerServer: ServeCSI), on a Unix socket, calling that API
// with Longhorn's API client as longhorn-csi-plugin does, which the
// sandbox's CSI provisioner and resizer call (CreateVolume, DeleteVolume,
// ControllerExpandVolume); and
// Longhorn's admission webhooks (its webhook/server package's mutators and
// validators) served in front of the sandbox's API server, as
// longhorn-manager serves them in a cluster.
//
// What is not Longhorn's code here: the TLS listener and webhook
// configurations that point kube-apiserver at Longhorn's handlers (in a
// cluster longhorn-manager's dynamiclistener keeps a certificate Secret and
// a Service; here a certificate made at start and a URL on loopback); the
// longhorn-manager pods (CreateManagerPod: what Longhorn's DaemonSet would
// create, for the node controller to find); the host (MountDisks: the
// disks as diskfs filesystems of their sizes in the process's own mount
// namespace, whose statfs counts what the data plane holds on them, and
// RunOnThisHost, which makes go-common-libs run its host operations in the
// process rather than join /host/proc's namespaces, and gives a disk's
// stat the filesystem ID FUSE does not carry); and
// the pod around Longhorn's CSI controller server (ServeCSI: the gRPC
// server on its socket, and what NewControllerServer reads from a pod:
// POD_NAMESPACE, KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT in
// sandbox-longhorn's environment, and in ServiceAccountDir a token of
// longhorn-service-account (asked with a TokenRequest and renewed; the
// account is bound to a ClusterRole over Longhorn's resources, as
// Longhorn's chart binds it) and the API server's CA.
// MountServiceAccountDir makes that directory a
// tmpfs in the process's own mount namespace: on a host that has no
// /var/run/secrets, the tmpfs covers /run, where /var/run leads, and
// /run's entries are bound back into it from the original, so nothing is
// created on the host and the process still sees /run as it was); and
// the Attacher, which plays kube-controller-manager's attach-detach
// controller and the CSI external-attacher with Longhorn's own
// VolumeManager.Attach and Detach. The instance managers, backing-image
// managers, backing-image data sources and share managers Longhorn's
// controllers reach are test/infrastructure/dataplane's. The engine image is still an
// object the simulation keeps deployed: Longhorn's engine image controller
// runs the engine binary from the host's /engine-binaries.
//
// Only the sandbox and its tests import this package: the manager binary
// does not link longhorn-manager's controllers.
package longhornmanager
