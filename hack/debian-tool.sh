#!/usr/bin/env bash
# Prints the path of a command the tests need, installing its Debian package with apt-get when it is
# not on PATH (so `make test` works on a fresh machine instead of skipping).
#
#   hack/debian-tool.sh COMMAND [PACKAGE]     PACKAGE defaults to COMMAND
#
# Only the path goes to stdout: chromium="$(hack/debian-tool.sh chromium)"
set -euo pipefail

command_name="${1:?usage: debian-tool.sh COMMAND [PACKAGE]}"
package="${2:-$command_name}"

log() { printf '%s: %s\n' "$command_name" "$*" >&2; }

if ! command -v "$command_name" >/dev/null 2>&1; then
  command -v apt-get >/dev/null 2>&1 || { log "error: not on PATH and no apt-get to install $package"; exit 1; }
  sudo=()
  [[ "$(id -u)" == 0 ]] || sudo=(sudo)
  log "installing Debian's $package package"
  # Two runs at once (make test, a developer) must not fight over dpkg's lock.
  (
    flock 9
    command -v "$command_name" >/dev/null 2>&1 || {
      "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600 update -qq >&2
      DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
        --no-install-recommends "$package" >&2
    }
  ) 9>"${TMPDIR:-/tmp}/overlay-guard-apt.lock"
fi

command -v "$command_name"
