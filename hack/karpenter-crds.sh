#!/usr/bin/env bash
# Prints the path of a directory holding Karpenter's own CRDs (karpenter.sh_nodeoverlays.yaml,
# karpenter.sh_nodepools.yaml, karpenter.sh_nodeclaims.yaml) at the pinned release, from the
# sigs.k8s.io/karpenter module on the Go module proxy, cached beside the control-plane binaries.
#
#   KARPENTER_VERSION    release to use (default: the pin below)
#   OVERLAY_GUARD_CACHE  cache root (default: $HOME/.cache/overlay-guard)
#
# Only the directory goes to stdout: crds="$(hack/karpenter-crds.sh)"
set -euo pipefail

version="${KARPENTER_VERSION:-v1.15.0}"
cache_root="${OVERLAY_GUARD_CACHE:-$HOME/.cache/overlay-guard}"
# Karpenter v1.15 declares go >= 1.26.9; the proxy serves that toolchain when the local one is older.
GOTOOLCHAIN="${KARPENTER_GOTOOLCHAIN:-go1.26.10}" exec bash "$(dirname "${BASH_SOURCE[0]}")/go-module-files.sh" \
  "$cache_root/karpenter-$version/crds" sigs.k8s.io/karpenter "$version" pkg/apis/crds \
  karpenter.sh_nodeoverlays.yaml karpenter.sh_nodepools.yaml karpenter.sh_nodeclaims.yaml
