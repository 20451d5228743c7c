// Package replicawriter plays Longhorn's volume controllers for the tests
// and benchmarks that place replicas themselves (test/gate,
// test/bench/gatebench) against a sandbox whose Longhorn runs the nodes
// only (sandbox.Options LonghornNodesOnly: longhorn-manager's own node, instance manager and Kubernetes node
// controllers keep the Nodes, their disks' status and the instance managers,
// and none of its controllers acts on the volumes and replicas written
// here): the writers are Longhorn v1.12.0's own code.
//
// StartPods starts longhorn-manager pods (longhornpod.Pod: Longhorn's own
// datastore.DataStore with informers of its own, so each
// pod's view is as stale as in a cluster, and Longhorn's own
// scheduler.ReplicaScheduler over it). Pod.Place is one volume controller
// placing its volume's unscheduled replica as longhorn-manager's syncVolume
// does: the volume and its replicas from the pod's datastore,
// ReplicaScheduler.ScheduleReplica, and DataStore.UpdateReplica with the
// cached resourceVersion; a refused write is retried as longhorn-manager's
// queue does (a conflict at once; otherwise three quick retries with its
// 5 ms doubling backoff, then at the pod's next Longhorn Node event or the
// informer resync). Place stops when the scheduler finds no disk on a view
// that is current (see Place).
//
// What is not Longhorn's code: the loop around one volume's sync (Longhorn's
// work queue), the stop rule, and the lost writes a test asks for
// (Options.Lose: another client touches the replica while the gate holds
// the write, so the write loses on resourceVersion whatever the gate
// answers).
package replicawriter
