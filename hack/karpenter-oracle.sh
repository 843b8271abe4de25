#!/usr/bin/env bash
# Prints the path of the karpenter-oracle binary (hack/karpenter-oracle/: Karpenter's own
# NodeOverlay controller as a differential oracle), building it from the Go module proxy on
# first use into the cache. Nothing is committed.
#
#   OVERLAY_GUARD_CACHE  cache root (default: $HOME/.cache/overlay-guard)
#
# Only the binary's path goes to stdout: oracle="$(hack/karpenter-oracle.sh)"
set -euo pipefail

hack_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mod="$hack_dir/karpenter-oracle"
# sigs.k8s.io/karpenter v1.15 declares go >= 1.26.9; the proxy serves that toolchain when the
# local one is older.
toolchain="${KARPENTER_GOTOOLCHAIN:-go1.26.10}"

log() { printf 'karpenter-oracle: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# shellcheck source=lib/cached-build.sh
source "$hack_dir/lib/cached-build.sh"
version="$(pinned_version "$mod" sigs.k8s.io/karpenter)"
[[ -n "$version" ]] || die "no sigs.k8s.io/karpenter requirement in $mod/go.mod"

cache_root="${OVERLAY_GUARD_CACHE:-$HOME/.cache/overlay-guard}"
out_dir="$cache_root/karpenter-oracle-$version"
bin="$out_dir/karpenter-oracle"

# The stamp ties the binary to the sources, the module graph and this script, so any edit rebuilds.
stamp="$(cat "$mod"/go.mod "$mod"/go.sum "$mod"/*.go "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)"

is_current() {
  [[ -x "$bin" && "$(cat "$out_dir/.stamp" 2>/dev/null)" == "$stamp" ]]
}

result="$bin"
reuse_or_lock
command -v go >/dev/null || die "go is needed to build the oracle from sigs.k8s.io/karpenter@$version"

started=$SECONDS
log "building against sigs.k8s.io/karpenter $version into $out_dir (2-6 min on 2 cores the first time)"
# buildvcs would stamp this repository's commit in and fail in checkouts git does not trust.
(cd "$mod" && GOTOOLCHAIN="$toolchain" CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -mod=readonly -buildvcs=false" \
  nice -n 10 go build -trimpath -o "$staging/karpenter-oracle" .)
mv -f "$staging/karpenter-oracle" "$bin"
finish_build
