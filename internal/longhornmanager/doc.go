// Package longhornmanager runs longhorn-manager v1.12.0's own control plane
// in the sandbox, imported from its module and not modified: per sandbox
// node one longhorn-manager (its own datastore, informers and controller ID,
// the node's name), running Longhorn's volume, replica and engine
// controllers (controller.NewVolumeController, NewReplicaController,
// NewEngineController) with Longhorn's own work queues, backoff, ownership
// and resyncs; and Longhorn's admission webhooks (its webhook/server
// package's mutators and validators) served in front of the sandbox's API
// server, as longhorn-manager serves them in a cluster.
//
// What is not Longhorn's code here: the TLS listener and webhook
// configurations that point kube-apiserver at Longhorn's handlers (in a
// cluster longhorn-manager's dynamiclistener keeps a certificate Secret and
// a Service; here a certificate made at start and a URL on loopback), and
// the objects other Longhorn controllers would keep that these controllers
// read: the nodes and their disks' space, the instance managers and the
// engine image, which the sandbox's simulated Longhorn (internal/simlonghorn)
// keeps. Nothing answers the instance manager's gRPC API, so no instance
// runs: volumes are created, their engines and replicas made and the
// replicas placed by Longhorn's own scheduler, and they stay detached.
//
// Only the sandbox and its tests import this package: the manager binary
// does not link longhorn-manager's controllers.
package longhornmanager
