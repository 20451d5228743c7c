//go:build tools

// Package gen pins the code generators the project runs.
package gen

import (
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
	_ "sigs.k8s.io/kustomize/kustomize/v5"
)
