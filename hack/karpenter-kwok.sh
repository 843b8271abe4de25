#!/usr/bin/env bash
# Prints the path of the karpenter-kwok binary (hack/karpenter-kwok/: Karpenter's KWOK operator plus the
# AWS provider's cloud-provider metrics controller, for the end-to-end suite), building it from the Go
# module proxy on first use into the cache. Beside the binary, crds/ holds the KWOKNodeClass CRD of the
# same sigs.k8s.io/karpenter release, which the operator watches. Nothing is committed.
#
#   OVERLAY_GUARD_CACHE  cache root (default: $HOME/.cache/overlay-guard)
#
# Only the binary's path goes to stdout: kwok="$(hack/karpenter-kwok.sh)"
set -euo pipefail

hack_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mod="$hack_dir/karpenter-kwok"
# github.com/aws/karpenter-provider-aws v1.15.0 declares go >= 1.26.9; the proxy serves that toolchain
# when the local one is older.
toolchain="${KARPENTER_GOTOOLCHAIN:-go1.26.10}"
crd_file="kwok/apis/crds/karpenter.kwok.sh_kwoknodeclasses.yaml"

log() { printf 'karpenter-kwok: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# shellcheck source=lib/cached-build.sh
source "$hack_dir/lib/cached-build.sh"
version="$(pinned_version "$mod" sigs.k8s.io/karpenter)"
[[ -n "$version" ]] || die "no sigs.k8s.io/karpenter requirement in $mod/go.mod"

cache_root="${OVERLAY_GUARD_CACHE:-$HOME/.cache/overlay-guard}"
out_dir="$cache_root/karpenter-kwok-$version"
bin="$out_dir/karpenter-kwok"

# The stamp ties the binary to the sources, the module graph and this script, so any edit rebuilds.
stamp="$(cat "$mod"/go.mod "$mod"/go.sum "$mod"/*.go "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)"

is_current() {
  [[ -x "$bin" && -s "$out_dir/crds/${crd_file##*/}" && "$(cat "$out_dir/.stamp" 2>/dev/null)" == "$stamp" ]]
}

result="$bin"
reuse_or_lock
command -v go >/dev/null || die "go is needed to build karpenter-kwok from sigs.k8s.io/karpenter@$version"

started=$SECONDS
log "building against sigs.k8s.io/karpenter $version into $out_dir (several minutes on 2 cores the first time)"
# buildvcs would stamp this repository's commit in and fail in checkouts git does not trust.
export GOTOOLCHAIN="$toolchain" CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -mod=readonly -buildvcs=false"
(cd "$mod" && nice -n 10 go build -trimpath -o "$staging/karpenter-kwok" .)
karpenter_dir="$(cd "$mod" && go list -m -f '{{.Dir}}' sigs.k8s.io/karpenter)"
[[ -s "$karpenter_dir/$crd_file" ]] || die "sigs.k8s.io/karpenter@$version has no $crd_file"
mkdir -p "$staging/crds"
cp "$karpenter_dir/$crd_file" "$staging/crds/"
chmod 0644 "$staging/crds"/*
rm -rf "$out_dir/crds"
mv -f "$staging/crds" "$out_dir/crds"
mv -f "$staging/karpenter-kwok" "$bin"
finish_build
