// Package sandbox runs a whole diskschedule cluster on one machine, for
// demos, manual testing and end-to-end tests: etcd and kube-apiserver
// (controller-runtime's envtest) and kube-scheduler as local processes on
// loopback, kube-scheduler configured with the diskschedule extender;
// Longhorn v1.12.0's own CRDs (from the longhorn-manager module) and
// DiskSchedule's; the RBAC, Services and ConfigMap of config/default; the
// manager in-process under the manager's own ServiceAccount identity and
// generated role, so a missing RBAC marker fails here as it would in a
// cluster; and the simulated Longhorn of package simlonghorn, which plays
// longhorn-manager v1.12, its CSI driver and the nodes' kubelets. The
// simulated cluster is described by a Topology file.
package sandbox
