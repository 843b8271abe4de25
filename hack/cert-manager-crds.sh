#!/usr/bin/env bash
# Prints the path of a directory holding cert-manager's CRDs for the Certificate and Issuer kinds the
# cert-manager variants of the deployment use, at the pinned release, taken from the
# github.com/cert-manager/cert-manager module on the Go module proxy (deploy/crds/) and copied into the
# cache. The e2e suite installs them so that the API server validates those objects too.
#
#   CERT_MANAGER_VERSION  release to use (default: the pin below)
#   OVERLAY_GUARD_CACHE   cache root (default: $HOME/.cache/overlay-guard)
#
# Only the directory goes to stdout: crds="$(hack/cert-manager-crds.sh)"
set -euo pipefail

version="${CERT_MANAGER_VERSION:-v1.21.2}"
cache_root="${OVERLAY_GUARD_CACHE:-$HOME/.cache/overlay-guard}"
out_dir="$cache_root/cert-manager-$version/crds"
files=(cert-manager.io_certificates.yaml cert-manager.io_issuers.yaml cert-manager.io_clusterissuers.yaml)

log() { printf 'cert-manager-crds: %s\n' "$*" >&2; }

complete() {
  local f
  for f in "${files[@]}"; do [[ -s "$1/$f" ]] || return 1; done
}

if complete "$out_dir"; then
  printf '%s\n' "$out_dir"
  exit 0
fi

command -v go >/dev/null || { log "error: go is needed to fetch github.com/cert-manager/cert-manager@$version"; exit 1; }
log "fetching github.com/cert-manager/cert-manager@$version from the Go module proxy"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
# Outside any module, so no go.mod of the project is consulted or changed.
module_dir="$(cd "$scratch" && GOFLAGS=-mod=mod go mod download -json "github.com/cert-manager/cert-manager@$version" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
[[ -n "$module_dir" && -d "$module_dir/deploy/crds" ]] ||
  { log "error: github.com/cert-manager/cert-manager@$version has no deploy/crds"; exit 1; }

mkdir -p "$out_dir"
tmp="$(mktemp -d "$out_dir/.tmp.XXXXXX")"
for f in "${files[@]}"; do cp "$module_dir/deploy/crds/$f" "$tmp/$f"; done
chmod 0644 "$tmp"/*.yaml
mv -f "$tmp"/*.yaml "$out_dir/"
rmdir "$tmp"
printf '%s\n' "$out_dir"
