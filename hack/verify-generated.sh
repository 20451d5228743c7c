#!/usr/bin/env bash
# Regenerates CRDs, RBAC and deepcopy code and fails when the result differs
# from the files in the tree: generated files are never edited by hand.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
gen=$1
generated=(config/crd/bases config/rbac/role.yaml api/v1beta2/zz_generated.deepcopy.go)

before=$(mktemp -d)
trap 'rm -rf "$before"' EXIT
for path in "${generated[@]}"; do
	mkdir -p "$before/$(dirname "$path")"
	cp -r "$path" "$before/$path" 2>/dev/null || true
done

"$gen" rbac:roleName=manager-role crd paths="./api/..." paths="./internal/..." paths="./cmd/..." output:crd:artifacts:config=config/crd/bases
"$gen" object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

status=0
for path in "${generated[@]}"; do
	if ! diff -r "$before/$path" "$path" >/dev/null 2>&1; then
		echo "verify: $path is stale; run 'make manifests generate' and commit the result" >&2
		diff -r "$before/$path" "$path" >&2 || true
		status=1
	fi
done
[ "$status" -eq 0 ] && echo "verify: generated files are current"
exit "$status"
