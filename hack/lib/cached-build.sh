# Sourced by the scripts that build a tool once into the cache (e2e-assets.sh, helm.sh,
# karpenter-oracle.sh, karpenter-kwok.sh). Before reuse_or_lock the caller sets out_dir, result (the path
# it prints), stamp and a log function, and defines is_current; before finish_build, started.

# The version go.mod in directory $1 pins for module $2 (a require line, on its own or in a block; comments,
# which may name versions, are skipped), read without invoking go, so the cached path stays fast and works on
# machines that only run the tests.
pinned_version() {
  awk -v m="$2" '$1 ~ /^\/\// { next }
    { for (i = 1; i < NF; i++) if ($i == m && $(i + 1) ~ /^v/) { print $(i + 1); exit } }' "$1/go.mod"
}

# Prints $result and exits when the cache holds a current build. Otherwise creates $out_dir, takes its
# lock (parallel test sessions wait for one build instead of racing into the same directory), checks
# again, and leaves an empty $staging directory inside it, removed on exit.
reuse_or_lock() {
  if is_current; then
    printf '%s\n' "$result"
    exit 0
  fi
  mkdir -p "$out_dir"
  exec 9>"$out_dir/.lock"
  if command -v flock >/dev/null; then
    flock 9
    if is_current; then
      printf '%s\n' "$result"
      exit 0
    fi
  fi
  staging="$(mktemp -d "$out_dir/.build.XXXXXX")"
  trap 'rm -rf "$staging"' EXIT
}

# Records the stamp of what was just moved into place and prints $result.
finish_build() {
  printf '%s\n' "$stamp" >"$out_dir/.stamp"
  log "built in $((SECONDS - started))s"
  printf '%s\n' "$result"
}
