#!/usr/bin/env bash
# Prints the path of promtool for the alert tests (tests/test_monitoring.py), installing Debian's
# `prometheus` package (which ships it) when none is on PATH.
#
# Only the path goes to stdout: promtool="$(hack/promtool.sh)"
set -euo pipefail
exec bash "$(dirname "${BASH_SOURCE[0]}")/debian-tool.sh" promtool prometheus
