#!/usr/bin/env bash
# Prints the path of a directory holding cert-manager's CRDs for the Certificate and Issuer kinds the
# cert-manager variants of the deployment use, at the pinned release, from the
# github.com/cert-manager/cert-manager module on the Go module proxy (deploy/crds/), cached. The e2e
# suite installs them so that the API server validates those objects too.
#
#   CERT_MANAGER_VERSION  release to use (default: the pin below)
#   OVERLAY_GUARD_CACHE   cache root (default: $HOME/.cache/overlay-guard)
#
# Only the directory goes to stdout: crds="$(hack/cert-manager-crds.sh)"
set -euo pipefail

version="${CERT_MANAGER_VERSION:-v1.21.2}"
cache_root="${OVERLAY_GUARD_CACHE:-$HOME/.cache/overlay-guard}"
exec bash "$(dirname "${BASH_SOURCE[0]}")/go-module-files.sh" \
  "$cache_root/cert-manager-$version/crds" github.com/cert-manager/cert-manager "$version" deploy/crds \
  cert-manager.io_certificates.yaml cert-manager.io_issuers.yaml cert-manager.io_clusterissuers.yaml
