// Package scenario runs the Longhorn scheduler extender's test plan against
// a running cluster (in practice the sandbox of test/infrastructure/sandbox) and reports
// what happened, without judging it: the demo prints the results, the
// end-to-end tests assert on them.
//
// Each scenario works in its own namespace. The race, restart and drain
// create a StatefulSet "web" with parallel pod management and a claim
// template: kube-controller-manager creates its pods web-0, web-1, … and
// their claims data-web-0, …, binds the claims to the volumes the
// provisioner creates, and re-creates the pods a restart or a drain removes
// (a drain evicts them through the eviction API, as kubectl drain does).
// The multi-claim scenario creates its pods and claims by themselves. A
// scenario waits with timeouts for kube-controller-manager, kube-scheduler
// and the data plane, and returns where the pods went, how long it took, and what every disk's DiskSchedule ledger
// granted, rejected and reserved meanwhile. A ledger monitor watches every
// DiskSchedule version during the run and reports any that broke the
// ledger's invariant.
//
// Pods request the longhorn.io/scheduler-extender resource only when the
// scenario's UseExtender is set: pods without it skip the extender, so one
// extender-enabled cluster serves both the runs with and without it.
// Cleanup deletes what a scenario created and waits until the ledgers grant
// nothing, so that scenarios can run back to back in one cluster. The
// scenarios assume that they are alone in the cluster.
package scenario
