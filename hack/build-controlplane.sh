#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kube-scheduler and etcd from
# the Go module proxy into the directory given as $1 (default bin/k8s). Each
# binary is built once.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-"$root/bin/k8s"}
mkdir -p "$out"
cd "$root/hack/tools/controlplane"

build() {
	local name=$1 pkg=$2
	if [ -x "$out/$name" ]; then
		echo "controlplane: $name already built"
		return
	fi
	echo "controlplane: building $name from $pkg (the first build takes several minutes)"
	local start=$SECONDS
	go build -o "$out/$name.tmp" "$pkg"
	mv "$out/$name.tmp" "$out/$name"
	echo "controlplane: $name built in $((SECONDS - start))s"
}

echo "controlplane: downloading modules"
go mod download
build etcd ./etcd
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager
build kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler
echo "controlplane: ready in $out"
