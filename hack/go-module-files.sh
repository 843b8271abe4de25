#!/usr/bin/env bash
# Copies files of a Go module's directory, fetched from the Go module proxy the way any Go dependency
# is, into a cache directory, and prints that directory. Nothing is built and nothing is committed.
#
#   hack/go-module-files.sh OUT_DIR MODULE VERSION SUBDIR FILE...
#   GOTOOLCHAIN  passed through: a module that declares a newer go needs its release from the proxy
#
# Only OUT_DIR goes to stdout.
set -euo pipefail

out_dir="$1" module="$2" version="$3" subdir="$4"
shift 4
files=("$@")

log() { printf '%s: %s\n' "${module##*/}" "$*" >&2; }

complete() {
  local f
  for f in "${files[@]}"; do [[ -s "$out_dir/$f" ]] || return 1; done
}

if complete; then
  printf '%s\n' "$out_dir"
  exit 0
fi

command -v go >/dev/null || { log "error: go is needed to fetch $module@$version"; exit 1; }
log "fetching $module@$version from the Go module proxy"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
# Outside any module, so no go.mod of the project is consulted or changed.
module_dir="$(cd "$scratch" && GOFLAGS=-mod=mod go mod download -json "$module@$version" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
[[ -n "$module_dir" && -d "$module_dir/$subdir" ]] || { log "error: $module@$version has no $subdir"; exit 1; }

# Copied beside the target and renamed, so a reader never sees half a file.
mkdir -p "$out_dir"
tmp="$(mktemp -d "$out_dir/.tmp.XXXXXX")"
for f in "${files[@]}"; do cp "$module_dir/$subdir/$f" "$tmp/$f"; done
chmod 0644 "$tmp"/*
mv -f "$tmp"/* "$out_dir/"
rmdir "$tmp"
printf '%s\n' "$out_dir"
