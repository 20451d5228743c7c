// Package sandbox runs a whole diskschedule cluster on one machine, for
// demos, manual testing and end-to-end tests: etcd and kube-apiserver
// (controller-runtime's envtest), kube-controller-manager and
// kube-scheduler as local processes on loopback, kube-scheduler configured
// with the diskschedule extender, kube-controller-manager with the
// workload, volume, node lifecycle, EndpointSlice and ServiceAccount
// controllers (package controlplane);
// Longhorn v1.12.0's own CRDs (from the longhorn-manager module) and
// DiskSchedule's; the RBAC, Services and ConfigMap of config/default; the
// manager in-process under the manager's own ServiceAccount identity and
// generated role, so a missing RBAC marker fails here as it would in a
// cluster; longhorn-manager v1.12.0's own control plane (cmd/sandbox-longhorn,
// test/infrastructure/longhornmanager) on the simulated data plane (test/infrastructure/dataplane);
// and the simulated cluster around it of package simcluster: the nodes'
// kubelets, and the CSI sidecars (provisioner, capacity, resizer), in a
// process of their own (cmd/sandbox-csi), that call Longhorn's own CSI
// controller server in sandbox-longhorn.
// The cluster is described by a Topology file.
//
// The nodes and their pods are the simulated cluster's kubelets, not
// sigs.k8s.io/kwok, although kwok (v0.8.0) builds here from Go modules: a
// kubelet starts a pod only once its Longhorn volumes are attached to the
// pod's node with a running replica, which is what makes the time until a
// StatefulSet is ready mean something, and kwok's stages select on the pod
// alone, so they cannot wait for another object. The kubelets run in the
// simulated cluster's manager and cache, with no further process to start,
// and keep each node's Lease with the kubelet's own lease controller
// (k8s.io/component-helpers), so node lifecycle sees them alive as it would
// see kwok's nodes.
//
// Sandbox.StopNode takes a node down as a node dies: its kubelet stops, and sandbox-longhorn, asked over a Unix
// socket in the sandbox's directory, stops the node's instance manager and
// longhorn-manager.
package sandbox
