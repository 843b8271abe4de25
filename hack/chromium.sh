#!/usr/bin/env bash
# Prints the path of a Chromium for the HTML report tests (tests/test_lint_report.py), installing
# Debian's `chromium` package when none is on PATH. Set CHROMIUM to use another binary.
#
# Only the path goes to stdout: chromium="$(hack/chromium.sh)"
set -euo pipefail

if [[ -n "${CHROMIUM:-}" ]]; then
  [[ -x "$CHROMIUM" ]] || { printf 'chromium: error: CHROMIUM=%s is not executable\n' "$CHROMIUM" >&2; exit 1; }
  printf '%s\n' "$CHROMIUM"
  exit 0
fi
exec bash "$(dirname "${BASH_SOURCE[0]}")/debian-tool.sh" chromium
