#!/usr/bin/env bash
# Prints the path of a zsh for the completion tests (tests/test_lint_outputs.py), installing
# Debian's `zsh` package with apt-get when none is on PATH.
#
# Only the path goes to stdout: zsh="$(hack/zsh.sh)"
set -euo pipefail

log() { printf 'zsh: %s\n' "$*" >&2; }

if ! command -v zsh >/dev/null 2>&1; then
  command -v apt-get >/dev/null 2>&1 || { log "error: no zsh on PATH and no apt-get to install it"; exit 1; }
  sudo=()
  [[ "$(id -u)" == 0 ]] || sudo=(sudo)
  log "installing Debian's zsh package"
  # Two runs at once (make test, a developer) must not fight over dpkg's lock.
  (
    flock 9
    command -v zsh >/dev/null 2>&1 || {
      "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600 update -qq >&2
      DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
        --no-install-recommends zsh >&2
    }
  ) 9>"${TMPDIR:-/tmp}/overlay-guard-zsh.lock"
fi

command -v zsh
