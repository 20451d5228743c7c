// Package podmutator is the pod opt-in webhook diskschedule-pods (DESIGN
// §6.1): a MutatingWebhookConfiguration, failure policy Ignore, that sees
// pod CREATEs in namespaces labelled diskschedule.longhorn.io/extender:
// enabled, so that the pods of applications nobody edits use the
// kube-scheduler extender.
//
// For a pod with a claim whose StorageClass's provisioner is Longhorn's
// (driver.longhorn.io), or whose bound PersistentVolume is Longhorn's, it
// adds longhorn.io/scheduler-extender: "1" to the first container's
// requests and limits (unless a container already asks for it) and, when
// the second scheduler is deployed, sets schedulerName to
// diskschedule-scheduler on a pod that asked for the default scheduler.
//
// Plan is the pure decision on a pod and what its claims are; Handler reads
// the claims (the manager's cache, then the API server for one the cache
// does not hold yet) and answers with a JSON patch. It never refuses a pod:
// a claim not created yet, a missing StorageClass, another driver's claim or
// an error leaves the pod as it is, with a log line. It serves on every
// manager replica, beside the admission gate and with its certificate.
package podmutator
