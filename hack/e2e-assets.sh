#!/usr/bin/env bash
# Prints the path of a directory holding kube-apiserver, etcd and kubectl for
# the end-to-end tests, building them from the Go module proxy on first use.
#
#   KUBEBUILDER_ASSETS   an existing directory with kube-apiserver and etcd;
#                        used as is, nothing is built
#   OVERLAY_GUARD_CACHE  cache root (default: $HOME/.cache/overlay-guard)
#
# Only the directory goes to stdout, so callers can do
#   assets="$(hack/e2e-assets.sh)"
set -euo pipefail

hack_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
k8s_mod="$hack_dir/e2e-assets"
etcd_mod="$hack_dir/e2e-assets/etcd"

log() { printf 'e2e-assets: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

has_control_plane() {
  [[ -x "$1/kube-apiserver" && -x "$1/etcd" ]]
}

if [[ -n "${KUBEBUILDER_ASSETS:-}" ]]; then
  if has_control_plane "$KUBEBUILDER_ASSETS"; then
    printf '%s\n' "$KUBEBUILDER_ASSETS"
    exit 0
  fi
  log "KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS lacks kube-apiserver or etcd; using the cache instead"
fi

# shellcheck source=lib/cached-build.sh
source "$hack_dir/lib/cached-build.sh"

k8s_version="$(pinned_version "$k8s_mod" k8s.io/kubernetes)"
etcd_version="$(pinned_version "$etcd_mod" go.etcd.io/etcd/server/v3)"
[[ -n "$k8s_version" ]] || die "no k8s.io/kubernetes requirement in $k8s_mod/go.mod"
[[ -n "$etcd_version" ]] || die "no go.etcd.io/etcd/server/v3 requirement in $etcd_mod/go.mod"

cache_root="${OVERLAY_GUARD_CACHE:-$HOME/.cache/overlay-guard}"
out_dir="$cache_root/$k8s_version"

# The stamp ties a cache entry to the exact module graphs and build recipe, so
# bumping a pin (or this script) rebuilds even when the directory exists.
stamp="$(cat "$k8s_mod/go.mod" "$k8s_mod/go.sum" "$etcd_mod/go.mod" "$etcd_mod/go.sum" "${BASH_SOURCE[0]}" |
  sha256sum | cut -d' ' -f1)"

is_current() {
  has_control_plane "$out_dir" && [[ -x "$out_dir/kubectl" ]] &&
    [[ "$(cat "$out_dir/.stamp" 2>/dev/null)" == "$stamp" ]]
}

result="$out_dir"
reuse_or_lock
command -v go >/dev/null || die "go is needed to build the control plane (or set KUBEBUILDER_ASSETS)"

minor="${k8s_version#v1.}"
minor="${minor%%.*}"
# Without these the binaries report v0.0.0-master, which makes kubectl warn
# about version skew and hides which release the tests ran against.
version_ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  version_ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  version_ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

# buildvcs would stamp this repository's commit into the binaries and fail in
# checkouts git does not trust; cgo is not needed by any of the three.
export CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"
build_flags=(-trimpath)

started=$SECONDS
log "building kube-apiserver and kubectl $k8s_version into $out_dir (10-25 min on 2 cores the first time)"
(cd "$k8s_mod" && go build "${build_flags[@]}" -ldflags "-s -w$version_ldflags" -o "$staging/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl)
log "building etcd $etcd_version"
(cd "$etcd_mod" && go build "${build_flags[@]}" -ldflags "-s -w" -o "$staging/etcd" go.etcd.io/etcd/server/v3)

for bin in kube-apiserver kubectl etcd; do
  mv -f "$staging/$bin" "$out_dir/$bin"
done
finish_build
