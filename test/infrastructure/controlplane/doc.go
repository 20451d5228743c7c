// Package controlplane runs the parts of a Kubernetes control plane that
// controller-runtime's envtest does not: kube-controller-manager (and,
// through Process, kube-scheduler) as local processes on loopback, next to
// envtest's etcd and kube-apiserver, with their own users and
// kubeconfigs. kube-apiserver and kube-controller-manager share a
// service-account signing key (WriteServiceAccountKey,
// ShareServiceAccountKey), so the token controller's tokens and the
// controllers' own ServiceAccount credentials work as in a cluster. The
// binaries are those `make controlplane` builds from k8s.io/kubernetes into
// bin/k8s.
package controlplane
