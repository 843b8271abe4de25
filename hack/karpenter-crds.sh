#!/usr/bin/env bash
# Prints the path of a directory holding Karpenter's own CRDs (karpenter.sh_nodeoverlays.yaml,
# karpenter.sh_nodepools.yaml, karpenter.sh_nodeclaims.yaml) at the pinned release, taken from the
# sigs.k8s.io/karpenter module on the Go module proxy the way any Go dependency is, and copied into
# the cache beside the control-plane binaries. Nothing is committed.
#
#   KARPENTER_VERSION    release to use (default: the pin below)
#   OVERLAY_GUARD_CACHE  cache root (default: $HOME/.cache/overlay-guard)
#
# Only the directory goes to stdout: crds="$(hack/karpenter-crds.sh)"
set -euo pipefail

version="${KARPENTER_VERSION:-v1.15.0}"
# Karpenter v1.15 declares go >= 1.26.9; the proxy serves that toolchain when the local one is older.
toolchain="${KARPENTER_GOTOOLCHAIN:-go1.26.10}"
cache_root="${OVERLAY_GUARD_CACHE:-$HOME/.cache/overlay-guard}"
out_dir="$cache_root/karpenter-$version/crds"
files=(karpenter.sh_nodeoverlays.yaml karpenter.sh_nodepools.yaml karpenter.sh_nodeclaims.yaml)

log() { printf 'karpenter-crds: %s\n' "$*" >&2; }

complete() {
  local f
  for f in "${files[@]}"; do [[ -s "$1/$f" ]] || return 1; done
}

if complete "$out_dir"; then
  printf '%s\n' "$out_dir"
  exit 0
fi

command -v go >/dev/null || { log "error: go is needed to fetch sigs.k8s.io/karpenter@$version"; exit 1; }
log "fetching sigs.k8s.io/karpenter@$version from the Go module proxy"
# Outside any module, so no go.mod of the project is consulted or changed.
module_dir="$(cd "$(mktemp -d)" && GOTOOLCHAIN="$toolchain" GOFLAGS=-mod=mod \
  go mod download -json "sigs.k8s.io/karpenter@$version" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
[[ -n "$module_dir" && -d "$module_dir/pkg/apis/crds" ]] ||
  { log "error: sigs.k8s.io/karpenter@$version has no pkg/apis/crds"; exit 1; }

mkdir -p "$out_dir"
tmp="$(mktemp -d "$out_dir/.tmp.XXXXXX")"
for f in "${files[@]}"; do cp "$module_dir/pkg/apis/crds/$f" "$tmp/$f"; done
chmod 0644 "$tmp"/*.yaml
mv -f "$tmp"/*.yaml "$out_dir/"
rmdir "$tmp"
printf '%s\n' "$out_dir"
