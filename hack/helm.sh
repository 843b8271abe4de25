#!/usr/bin/env bash
# Prints the path of a helm binary for the chart tests, built once from the Go module proxy
# (helm.sh/helm/v3/cmd/helm at the pinned release) into the cache beside the control plane.
#
#   HELM_VERSION         release to build (default: the pin below)
#   OVERLAY_GUARD_CACHE  cache root (default: $HOME/.cache/overlay-guard)
#
# Only the path goes to stdout: helm="$(hack/helm.sh)"
set -euo pipefail

version="${HELM_VERSION:-v3.22.0}"
cache_root="${OVERLAY_GUARD_CACHE:-$HOME/.cache/overlay-guard}"
out_dir="$cache_root/helm-$version"
bin="$out_dir/helm"

log() { printf 'helm: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# The stamp ties the binary to this recipe: changing the script (flags, pin) rebuilds it.
stamp="$(printf '%s\n' "$version" | cat - "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)"

is_current() {
  [[ -x "$bin" && "$(cat "$out_dir/.stamp" 2>/dev/null)" == "$stamp" ]]
}

result="$bin"
# shellcheck source=lib/cached-build.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/cached-build.sh"
reuse_or_lock
command -v go >/dev/null || die "go is needed to build helm $version"

export CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"
# As helm's own Makefile does: without these stamps `helm version` says unreleased, and `helm template`
# and `helm lint` assume Kubernetes v1.20, which fails every chart asking for a newer kubeVersion. The
# Kubernetes version is the one of the client-go helm is built with (v0.X.Y -> 1.X).
mod_file="$(cd "$staging" && go mod download -json "helm.sh/helm/v3@$version" |
  sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')"
k8s_minor="$(awk '$1 == "k8s.io/client-go" { split($2, v, "."); print v[2]; exit }' "$mod_file")"
[[ -n "$k8s_minor" ]] || die "no k8s.io/client-go requirement in helm $version's go.mod"
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$version -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
done

started=$SECONDS
log "building helm $version into $out_dir (a few minutes on 2 cores the first time)"
# Outside any module: `go install pkg@version` uses helm's own go.mod and go.sum, checked against
# the checksum database like any dependency.
(cd "$staging" && GOBIN="$staging" go install -trimpath -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@$version")
"$staging/helm" version --short >/dev/null || die "the built helm does not run"
mv -f "$staging/helm" "$bin"
finish_build
