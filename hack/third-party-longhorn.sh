#!/usr/bin/env bash
# Re-creates third_party/: the modules that longhorn-manager v1.12.0's
# controller and webhook packages import at versions the Go module proxy does
# not serve (Longhorn's engine, instance-manager, share-manager,
# backing-image-manager, SPDK engine, backupstore and types modules, and
# rancher/dynamiclistener). Each is taken unmodified from longhorn-manager's
# own git tree at its v1.12.0 tag (vendor/<module>, exactly what
# longhorn-manager itself builds with, LICENSE included), and given a go.mod
# naming its module path so that go.mod's replace directives can point at it.
# Only the sandbox and its tests import these packages; the manager binary
# does not.
#
# Usage: hack/third-party-longhorn.sh [LONGHORN_MANAGER_GIT_DIR]
# Without an argument the tree is cloned from
# https://github.com/longhorn/longhorn-manager.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tag=v1.12.0
modules=(
	github.com/longhorn/backing-image-manager
	github.com/longhorn/backupstore
	github.com/longhorn/longhorn-engine
	github.com/longhorn/longhorn-instance-manager
	github.com/longhorn/longhorn-share-manager
	github.com/longhorn/longhorn-spdk-engine
	github.com/longhorn/types
	github.com/rancher/dynamiclistener
)

src=${1:-}
if [ -z "$src" ]; then
	src=$(mktemp -d)
	trap 'rm -rf "$src"' EXIT
	git clone --bare --filter=blob:none --branch "$tag" https://github.com/longhorn/longhorn-manager "$src"
fi

out="$root/third_party"
mkdir -p "$out"
go_version=$(git --git-dir="$src" show "$tag:go.mod" | sed -n 's/^go //p')
for m in "${modules[@]}"; do
	rm -rf "${out:?}/$m"
	mkdir -p "$out/$m"
	strip=$(($(tr -cd / <<<"$m" | wc -c) + 2))
	git --git-dir="$src" archive "$tag" "vendor/$m" | tar -x -C "$out/$m" --strip-components=$strip
	version=$(git --git-dir="$src" show "$tag:vendor/modules.txt" | sed -n "s|^# $m ||p")
	printf 'module %s\n\ngo %s\n' "$m" "$go_version" >"$out/$m/go.mod"
	echo "$m $version"
done | sort >"$out/VERSIONS"
commit=$(git --git-dir="$src" rev-parse "$tag^{commit}")
cat >"$out/README.md" <<EOF
# Modules carried for the sandbox's longhorn-manager

longhorn-manager $tag's packages \`controller\` and \`webhook\` import these
modules at versions the Go module proxy does not serve. Each directory is
longhorn-manager's own \`vendor/<module>\`
at tag $tag (commit $commit), unmodified, with its LICENSE; the only file
added is a \`go.mod\` naming the module path, so that the project's \`go.mod\`
can \`replace\` the module with it. \`VERSIONS\` lists the version of each that
longhorn-manager $tag requires.

Only the sandbox and its tests import them (\`cmd/sandbox-longhorn\`, the
sandbox's longhorn-manager, above all); the manager binary does not.
Re-create this tree with
\`hack/third-party-longhorn.sh [path to a longhorn-manager git directory]\`.
EOF
echo "third-party-longhorn: ${#modules[@]} modules from longhorn-manager $tag ($commit) in $out"
