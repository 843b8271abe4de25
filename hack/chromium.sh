#!/usr/bin/env bash
# Prints the path of a Chromium for the HTML report tests (tests/test_lint_report.py), installing
# Debian's `chromium` package with apt-get when none is on PATH. Set CHROMIUM to use another binary.
#
# Only the path goes to stdout: chromium="$(hack/chromium.sh)"
set -euo pipefail

log() { printf 'chromium: %s\n' "$*" >&2; }

if [[ -n "${CHROMIUM:-}" ]]; then
  [[ -x "$CHROMIUM" ]] || { log "error: CHROMIUM=$CHROMIUM is not executable"; exit 1; }
  printf '%s\n' "$CHROMIUM"
  exit 0
fi

if ! command -v chromium >/dev/null 2>&1; then
  command -v apt-get >/dev/null 2>&1 || { log "error: no chromium on PATH and no apt-get to install it"; exit 1; }
  sudo=()
  [[ "$(id -u)" == 0 ]] || sudo=(sudo)
  log "installing Debian's chromium package"
  # Two runs at once (make test, a developer) must not fight over dpkg's lock.
  (
    flock 9
    command -v chromium >/dev/null 2>&1 || {
      "${sudo[@]}" apt-get update -qq >&2
      DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends chromium >&2
    }
  ) 9>"${TMPDIR:-/tmp}/overlay-guard-chromium.lock"
fi

command -v chromium
