// Package failover tests the manager's leader failover against a real
// kube-scheduler: two managers elect a leader in the sandbox, the leader
// stops during a scheduling burst, and the other must take over the
// extender, the extender Service's EndpointSlice and the ledgers without
// losing a granted reservation or overfilling a disk.
//
// kube-scheduler calls a fixed URL. In a cluster that URL is the
// selector-less Service whose EndpointSlice the leader points at itself; in
// the tests it is a loopback forwarder that, like kube-proxy, sends each new
// connection to the endpoint the EndpointSlice names at that moment. Each
// manager advertises its own pod IP (from TEST-NET-1: the API server refuses
// loopback addresses in an EndpointSlice) and listens on its own loopback
// port; the forwarder's map from "podIP:9504" to that port stands in for the
// pod network. The EndpointSlice's address is followed as written, so no
// manager option is needed.
//
// A reservation is in flight between the extender granting it and Longhorn
// placing the volume's replica on the pod's node, which for a best-effort
// volume waits for the attach. In the sandbox, where longhorn-manager
// v1.12.0's own controllers attach and place on a simulated data plane,
// nothing stands between the binding and the attach, where a cluster's
// attach path takes a second or more; a validating webhook served by the
// tests makes each attach take attachLatency, so the leader stops while
// reservations are granted and not yet handed over, as it would in a
// cluster. TestGateDuringFailover runs beside Longhorn's own node
// controllers, with its own writers placing replicas.
//
// The tests start etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler; they need the binaries of `make controlplane` (or
// KUBEBUILDER_ASSETS) and are skipped with -short.
package failover
