#!/usr/bin/env bash
# Prints the path of the flux-build binary (hack/flux-build/: Flux's own Kustomization build, the oracle for
# sources/flux.py), building it from the Go module proxy on first use into the cache. Nothing is committed.
#
#   OVERLAY_GUARD_CACHE  cache root (default: $HOME/.cache/overlay-guard)
#
# Only the binary's path goes to stdout: flux_build="$(hack/flux-build.sh)"
set -euo pipefail

hack_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mod="$hack_dir/flux-build"

log() { printf 'flux-build: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# shellcheck source=lib/cached-build.sh
source "$hack_dir/lib/cached-build.sh"
version="$(pinned_version "$mod" github.com/fluxcd/pkg/kustomize)"
[[ -n "$version" ]] || die "no github.com/fluxcd/pkg/kustomize requirement in $mod/go.mod"

cache_root="${OVERLAY_GUARD_CACHE:-$HOME/.cache/overlay-guard}"
out_dir="$cache_root/flux-build-$version"
bin="$out_dir/flux-build"

# The stamp ties the binary to the sources, the module graph and this script, so any edit rebuilds.
stamp="$(cat "$mod"/go.mod "$mod"/go.sum "$mod"/*.go "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)"

is_current() {
  [[ -x "$bin" && "$(cat "$out_dir/.stamp" 2>/dev/null)" == "$stamp" ]]
}

result="$bin"
reuse_or_lock
command -v go >/dev/null || die "go is needed to build the Flux oracle from github.com/fluxcd/pkg/kustomize@$version"

started=$SECONDS
log "building against github.com/fluxcd/pkg/kustomize $version into $out_dir (a few minutes on 2 cores the first time)"
# buildvcs would stamp this repository's commit in and fail in checkouts git does not trust.
(cd "$mod" && CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -mod=readonly -buildvcs=false" \
  nice -n 10 go build -trimpath -o "$staging/flux-build" .)
mv -f "$staging/flux-build" "$bin"
finish_build
