// Package sandbox runs a whole diskschedule cluster on one machine, for
// demos, manual testing and end-to-end tests: etcd and kube-apiserver
// (controller-runtime's envtest) and kube-scheduler as local processes on
// loopback, kube-scheduler configured with the diskschedule extender; the
// CRDs and the RBAC of config/default; the manager in-process under the
// manager's own ServiceAccount identity and generated role, so a missing
// RBAC marker fails here as it would in a cluster; one disk monitor per
// simulated node, under the disk monitor's identity and role; and the
// simulated data plane of package dataplane. The simulated cluster is
// described by a Topology file.
package sandbox
