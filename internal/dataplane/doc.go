// Package dataplane is a simulated data plane for the sandbox: a stand-in
// for what a real cluster's kubelets, CSI external-provisioner (with the
// Kubernetes PV controller and the pvc-protection controller), CSI
// attacher, Longhorn instance managers and backing-image manager do. None of
// it runs in a real deployment, and nothing here decides capacity: it only
// makes the objects the diskschedule controllers read look as they would on
// a real cluster.
//
//   - Kubelet keeps each simulated Kubernetes Node Ready, with allocatable
//     cpu, memory, pods and the longhorn.io/scheduler-extender extended
//     resource, and without the not-ready taint, re-asserting the status
//     whenever something changes it. It marks a pod bound to such a node
//     Running once every Longhorn volume it uses is attached to that node and
//     has a running replica, and finishes the graceful deletion of its pods.
//   - Provisioner provisions each PersistentVolumeClaim of a StorageClass of
//     the Longhorn CSI driver (driver.longhorn.io): a Longhorn Volume named
//     pvc-<claim UID> sized and shaped by the claim and the class parameters
//     (numberOfReplicas, dataLocality, nodeSelector, diskSelector,
//     backingImage), and a PersistentVolume bound to the claim. It expands
//     the Volume when the claim asks for more, releases the claim's
//     pvc-protection finalizer once no pod uses it, and reclaims (deletes)
//     the Volume and the PersistentVolume once the claim is gone.
//   - Attacher attaches each Volume (spec.nodeID) to the node of the pod
//     using it and detaches it when no live pod does.
//   - Replicas marks a Replica running once its ledger entry is granted: the
//     DiskSchedule named by spec.diskID has it scheduled at exactly
//     spec.volumeSize.
//   - BackingImages sets a BackingImage's status.size from the declared
//     spec.sourceParameters["size"], as reading the source would.
//
// The data plane runs with administrator credentials, like the components it
// replaces, and carries no RBAC markers: the manager's generated role must not
// grow by what the simulation needs.
package dataplane
