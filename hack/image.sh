#!/usr/bin/env bash
# Builds the overlay-guard OCI image without a Docker daemon, from Debian's packages and PyPI wheels only.
#
#   hack/image.sh [build]   build (or reuse from the cache) dist/overlay-guard-<version>.oci.tar; the
#                           archive's path is the last line on stdout, digest and size go to stderr
#   hack/image.sh lock      re-resolve hack/image/requirements.lock from pyproject.toml's dependencies
#   hack/image.sh runtime   install podman and runc (the e2e suite runs the image with them)
#
#   OVERLAY_GUARD_CACHE         cache root (default: $HOME/.cache/overlay-guard)
#   SOURCE_DATE_EPOCH           timestamp of the application layer and image config (default: HEAD's commit time)
#   OVERLAY_GUARD_IMAGE_SOURCE  org.opencontainers.image.source (default: [project.urls] Source in pyproject.toml)
#
# Two cached stages: the base (a Debian rootfs with python3 and a venv holding the locked wheels, keyed by
# this script, hack/image/, the Debian suite and their last commit's time) and the final image (the
# project's wheel added as a second layer, keyed by the base, the project's sources, SOURCE_DATE_EPOCH and
# the revision). A second build with unchanged inputs only copies.
set -euo pipefail
# Stages return their directory through $(...): a failure inside one must still stop the build.
shopt -s inherit_errexit

hack_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$hack_dir/.." && pwd)"
lock="$hack_dir/image/requirements.lock"
build_lock="$hack_dir/image/build-requirements.lock"
cache_root="${OVERLAY_GUARD_CACHE:-$HOME/.cache/overlay-guard}"
cache="$cache_root/image"

# The image's Python comes from this suite; wheels are chosen for its interpreter and glibc.
suite=bookworm
py_version=3.11
glibc_minor=36
venv=/opt/overlay-guard
uid=65532
# Extracted, never configured: no maintainer script runs, so no shell is needed to build the rootfs
# and none ends up in it. dpkg and tar come along as python3's pre-dependencies and are dropped again.
# libstdc++6 belongs to the manylinux platform: wheels with C++ extensions (google-re2) load it from the system.
debian_packages=(python3-minimal python3.11 libpython3.11-stdlib libstdc++6)
dropped_packages=(dpkg tar)

chroot="$(command -v chroot || echo /usr/sbin/chroot)"

log() { printf 'image: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
sha() { sha256sum | cut -d' ' -f1; }

host_python() {
  if [[ -x "$repo/.venv/bin/python" ]]; then printf '%s\n' "$repo/.venv/bin/python"; else command -v python3; fi
}

# --- tools -------------------------------------------------------------------------------------------

ensure_debs() {
  local missing=() pkg
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
  done
  ((${#missing[@]})) || return 0
  [[ $EUID -eq 0 ]] || die "missing Debian packages ${missing[*]}; install them (apt-get install ${missing[*]})"
  log "installing ${missing[*]} from Debian"
  apt-get -o DPkg::Lock::Timeout=600 update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends \
    "${missing[@]}" >&2
}

# --- PyPI ----------------------------------------------------------------------------------------------

# pip flags that select wheels for the image's interpreter (CPython 3.11 on glibc 2.36), not the host's.
target_flags() {
  local m
  printf '%s\n' --only-binary=:all: --implementation cp --python-version "$py_version" \
    --abi "cp${py_version/./}" --abi abi3 --abi none --platform manylinux2014_x86_64
  for ((m = glibc_minor; m >= 17; m--)); do printf '%s\n' --platform "manylinux_2_${m}_x86_64"; done
}

# The dependencies pyproject.toml declares, one a line, sorted: the lock records their hash.
declared_deps() {
  "$(host_python)" - "$repo/pyproject.toml" <<'EOF'
import sys, tomllib
with open(sys.argv[1], "rb") as f:
    print("\n".join(sorted(tomllib.load(f)["project"]["dependencies"])))
EOF
}

# Resolves `requirements` for the image's interpreter and writes them with hashes to `out`.
resolve() {
  local out="$1" header="$2"
  shift 2
  local report tmp flags
  tmp="$(mktemp -d)"
  report="$tmp/report.json"
  mapfile -t flags < <(target_flags)
  # The host's own find-links (a local wheel directory) must not leak into what the image gets.
  PIP_FIND_LINKS='' "$(host_python)" -m pip install --quiet --dry-run --ignore-installed --target "$tmp/t" \
    --report "$report" "${flags[@]}" "$@" >&2
  "$(host_python)" - "$report" "$header" >"$out" <<'EOF'
import json, sys
report = json.load(open(sys.argv[1]))
print(sys.argv[2])
for item in sorted(report["install"], key=lambda i: i["metadata"]["name"].lower()):
    digest = item["download_info"]["archive_info"]["hashes"]["sha256"]
    print(f'{item["metadata"]["name"]}=={item["metadata"]["version"]} --hash=sha256:{digest}')
EOF
  rm -rf "$tmp"
}

cmd_lock() {
  local deps
  mapfile -t deps < <(declared_deps)
  log "resolving ${#deps[@]} dependencies for CPython $py_version on glibc 2.$glibc_minor"
  resolve "$lock" "# overlay-guard image: runtime wheels (hack/image.sh lock). deps-sha256: $(declared_deps | sha)" \
    "${deps[@]}"
  # pip runs inside the image's venv to install; setuptools and wheel build the project's wheel.
  resolve "$build_lock" "# overlay-guard image: build tools (hack/image.sh lock)" pip setuptools wheel
  log "wrote $lock and $build_lock"
}

check_lock() {
  [[ -s "$lock" && -s "$build_lock" ]] || die "no $lock: run hack/image.sh lock"
  grep -q "deps-sha256: $(declared_deps | sha)\$" "$lock" ||
    die "pyproject.toml's dependencies changed since $lock was written: run hack/image.sh lock"
}

# The locked wheels, downloaded once per lock into the cache and verified against their hashes.
fetch_wheels() {
  local dir flags
  dir="$cache/wheels-$(cat "$lock" "$build_lock" | sha)"
  if [[ ! -f "$dir/.complete" ]]; then
    log "downloading the locked wheels into $dir"
    rm -rf "$dir"
    mkdir -p "$dir"
    mapfile -t flags < <(target_flags)
    PIP_FIND_LINKS='' "$(host_python)" -m pip download --quiet --no-deps --require-hashes -d "$dir" \
      "${flags[@]}" -r "$lock" -r "$build_lock" >&2
    touch "$dir/.complete"
  fi
  printf '%s\n' "$dir"
}

# --- stage 1: the base rootfs and its layer --------------------------------------------------------------

# The host's Debian sources (same suite as the image on this machine kind), pasted into mmdebstrap.
apt_sources() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [[ -s "$f" ]] && grep -q "$suite" "$f" && printf '%s\n' "$f"
  done
  return 0
}

rfc3339() { date -u -d "@$1" +%Y-%m-%dT%H:%M:%SZ; }

# Files newer than `epoch` get it as their mtime, so layers do not depend on when they were built.
clamp_mtimes() {
  find "$1" -newermt "@$2" -print0 | xargs -0r touch -h -d "@$2"
}

# Deletes the files of the .deb packages `names` from `rootfs` (directories stay: others share them).
drop_packages() {
  local rootfs="$1" debs="$2" name deb
  shift 2
  for name in "$@"; do
    for deb in "$debs/${name}"_*.deb; do
      [[ -e "$deb" ]] || die "no .deb for $name to drop"
      dpkg-deb --fsys-tarfile "$deb" | tar -t | while IFS= read -r path; do
        path="${path#./}"
        if [[ -n "$path" && ! -d "$rootfs/$path" ]]; then rm -f "$rootfs/$path"; fi
      done
    done
  done
}

# A dpkg status database for the packages kept, so scanners can list what the image holds.
write_status() {
  local rootfs="$1" debs="$2" deb name
  shift 2
  : >"$rootfs/var/lib/dpkg/status"
  for deb in "$debs"/*.deb; do
    name="$(dpkg-deb -f "$deb" Package)"
    [[ " $* " == *" $name "* ]] && continue
    dpkg-deb -f "$deb" | sed '/^Package:/a Status: install ok installed' >>"$rootfs/var/lib/dpkg/status"
    printf '\n' >>"$rootfs/var/lib/dpkg/status"
    printf '%s=%s\n' "$name" "$(dpkg-deb -f "$deb" Version)"
  done
}

# Runs a command in the rootfs as root, with no environment from the host.
in_rootfs() {
  local rootfs="$1"
  shift
  env -i PATH="$venv/bin:/usr/bin:/bin" HOME=/nonexistent LANG=C.UTF-8 PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1 "$chroot" "$rootfs" "$@"
}

# pip from the locked wheel, run by the image's own interpreter: nothing of pip stays in the image.
pip_in_rootfs() {
  local rootfs="$1"
  shift
  local pip_whl
  pip_whl="$(cd "$rootfs/tmp/wheels" && ls pip-*.whl)"
  in_rootfs "$rootfs" "$venv/bin/python" "/tmp/wheels/$pip_whl/pip" "$@" >&2
}

# Byte-code with unchecked hashes: valid whatever the files' mtimes, identical on every build. Test
# suites and kubernetes.aio (an asyncio twin of the client the project never imports, 35 MB of
# byte-code) are left uncompiled.
compile_in_rootfs() {
  local rootfs="$1"
  shift
  in_rootfs "$rootfs" /usr/bin/python3 -m compileall -q -j1 --invalidation-mode unchecked-hash \
    -x '/(test|tests|idle_test)/|/kubernetes/aio/' "$@" >&2
}

# Tied to the recipe, not to HEAD, so a commit elsewhere in the repository reuses the base.
base_epoch() {
  local epoch
  epoch="$(git -C "$repo" log -1 --format=%ct -- hack/image.sh hack/image 2>/dev/null || true)"
  printf '%s\n' "${epoch:-0}"
}

# Manylinux wheels take some libraries from the system: each extension module's must resolve in the image,
# or the webhook would fail at its first import instead of the build failing here.
check_libraries() {
  local rootfs="$1" so out broken=""
  while IFS= read -r so; do
    # The dynamic loader fails on a missing direct dependency and says "not found" for an indirect one.
    if ! out="$(in_rootfs "$rootfs" /lib64/ld-linux-x86-64.so.2 --list "${so#.}" 2>&1)" ||
      [[ "$out" == *"not found"* ]]; then
      broken+=$'\n'"$(grep -E 'not found|error' <<<"$out" | head -3)"
    fi
  done < <(cd "$rootfs" && find ".$venv" -name '*.so*' -type f)
  [[ -z "$broken" ]] || die "libraries missing from the image (add their Debian packages): $broken"
}

base_key() {
  { cat "${BASH_SOURCE[0]}" "$lock" "$build_lock"; printf '%s\n' "$suite" "${debian_packages[@]}" "$1"; } | sha
}

build_base() {
  local key="$1" wheels="$2" dir="$cache/base-$1"
  [[ -f "$dir/.complete" ]] && { printf '%s\n' "$dir"; return; }
  local epoch="$3" started=$SECONDS
  local sources
  mapfile -t sources < <(apt_sources)
  ((${#sources[@]})) || die "no apt source for $suite in /etc/apt/sources.list{,.d}"
  rm -rf "$dir"
  mkdir -p "$dir"
  local tmp="$dir/tmp" rootfs="$dir/tmp/rootfs"
  mkdir -p "$tmp/debs"
  log "base: Debian $suite ${debian_packages[*]} (mmdebstrap, extract variant)"
  SOURCE_DATE_EPOCH="$epoch" nice mmdebstrap --quiet --mode=root --variant=extract \
    --include="$(IFS=,; printf '%s' "${debian_packages[*]}")" \
    --skip=cleanup/apt/cache "$suite" "$rootfs" "${sources[@]}" >&2
  # Kept by mmdebstrap for this: the .debs say what each package installed and at which version.
  mv "$rootfs"/var/cache/apt/archives/*.deb "$tmp/debs/"

  drop_packages "$rootfs" "$tmp/debs" "${dropped_packages[@]}"
  write_status "$rootfs" "$tmp/debs" "${dropped_packages[@]}" >"$dir/packages.txt"
  # apt's directories go too: the image has no apt, and their owner (_apt) varies between builds.
  rm -rf "${rootfs:?}"/usr/share/{doc,man,info,locale,lintian,bug} "${rootfs:?}"/var/cache/* \
    "${rootfs:?}"/var/log/* "${rootfs:?}"/etc/{hostname,resolv.conf,apt} "${rootfs:?}"/var/lib/apt "${rootfs:?}"/dev/*
  printf 'root:x:0:0:root:/root:/nonexistent\nnonroot:x:%d:%d:nonroot:/home/nonroot:/nonexistent\n' \
    "$uid" "$uid" >"$rootfs/etc/passwd"
  printf 'root:x:0:\nnonroot:x:%d:\n' "$uid" >"$rootfs/etc/group"
  install -d -m 0700 -o "$uid" -g "$uid" "$rootfs/home/nonroot"
  install -d -m 1777 "$rootfs/tmp"

  log "base: venv $venv with $(grep -c '==' "$lock") locked wheels"
  in_rootfs "$rootfs" /usr/bin/python3 -m venv --without-pip "$venv"
  cp -a "$wheels" "$rootfs/tmp/wheels"
  cp "$lock" "$rootfs/tmp/wheels/requirements.lock"
  pip_in_rootfs "$rootfs" install --quiet --no-index --find-links /tmp/wheels --require-hashes --no-deps \
    --no-compile -r /tmp/wheels/requirements.lock
  rm -rf "$rootfs/tmp/wheels"
  check_libraries "$rootfs"
  compile_in_rootfs "$rootfs" "/usr/lib/python$py_version" "$venv/lib"
  clamp_mtimes "$rootfs" "$epoch"

  umoci init --layout "$dir/layout"
  umoci new --image "$dir/layout:base"
  umoci unpack --image "$dir/layout:base" "$dir/bundle" >/dev/null
  rmdir "$dir/bundle/rootfs"
  mv "$rootfs" "$dir/bundle/rootfs"
  umoci repack --refresh-bundle --image "$dir/layout:base" \
    --history.created "$(rfc3339 "$epoch")" \
    --history.created_by "mmdebstrap --variant=extract $suite ${debian_packages[*]}; pip install -r requirements.lock" \
    "$dir/bundle"
  printf '%s\n' "$epoch" >"$dir/epoch"
  rm -rf "$tmp"
  touch "$dir/.complete"
  log "base: built in $((SECONDS - started))s"
  printf '%s\n' "$dir"
}

# --- stage 2: the project's wheel as a second layer, the config, the archive ------------------------------

# pyproject.toml's value at `path` (dotted), or nothing.
pyproject() {
  "$(host_python)" - "$repo/pyproject.toml" "$1" <<'PY'
import sys, tomllib
value = tomllib.load(open(sys.argv[1], "rb"))
for part in sys.argv[2].split("."):
    value = value.get(part, {}) if isinstance(value, dict) else {}
if isinstance(value, list):
    print("\n".join(map(str, value)))
elif value != {}:
    print(value)
PY
}

# What the wheel is built from: pyproject.toml, the readme and the top-level packages it lists (symlinks
# resolved), copied so the build never writes into the work tree.
stage_sources() {
  local out="$1" tops=() files=()
  mapfile -t tops < <(pyproject tool.setuptools.packages | cut -d. -f1 | sort -u)
  ((${#tops[@]})) || die "pyproject.toml lists no [tool.setuptools] packages"
  if git -C "$repo" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    mapfile -t files < <(cd "$repo" && git ls-files -co --exclude-standard -- pyproject.toml README.md "${tops[@]}" |
      grep -v -e '__pycache__/' -e '\.pyc$' | sort -u)
  else
    mapfile -t files < <(cd "$repo" && find pyproject.toml README.md "${tops[@]}" -type f ! -name '*.pyc' | sort)
  fi
  mkdir -p "$out"
  (cd "$repo" && for f in "${files[@]}"; do [[ -e "$f" ]] && printf '%s\0' "$f"; done |
    tar --null -T - --dereference -cf - | tar -C "$out" -xf -)
}

tree_hash() {
  (cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha)
}

build_venv() {
  local dir
  dir="$cache/build-venv-$(sha <"$build_lock")"
  if [[ ! -f "$dir/.complete" ]]; then
    rm -rf "$dir"
    "$(host_python)" -m venv "$dir"
    PIP_FIND_LINKS='' "$dir/bin/python" -m pip install --quiet --no-index --find-links "$1" --require-hashes \
      -r "$build_lock" >&2
    touch "$dir/.complete"
  fi
  printf '%s\n' "$dir"
}

build_final() {
  local base="$1" wheels="$2" src="$3" out="$4"
  local work layout created
  created="$(rfc3339 "$epoch")"
  work="$out/tmp"
  layout="$work/layout"
  mkdir -p "$work/dist" "$work/layer"

  # setuptools is chatty on success; its output is shown only when the build fails.
  "$(build_venv "$wheels")/bin/python" -m pip wheel --no-deps --no-build-isolation --no-index \
    -w "$work/dist" "$src" >"$work/wheel.log" 2>&1 || { cat "$work/wheel.log" >&2; die "building the wheel failed"; }
  cp -a "$base/layout" "$layout"
  # Hard links: pip and compileall only add files, so the cached base stays untouched, and the copy is
  # instant where a real one of 200 MB would not be.
  local rootfs="$work/rootfs" base_epoch
  base_epoch="$(cat "$base/epoch")"
  cp -al "$base/bundle/rootfs" "$rootfs"
  mkdir -p "$rootfs/tmp/wheels"
  cp "$wheels"/pip-*.whl "$work"/dist/*.whl "$rootfs/tmp/wheels/"
  pip_in_rootfs "$rootfs" install --quiet --no-index --find-links /tmp/wheels --no-deps --no-compile \
    "overlay-guard==$version"
  # Every dependency the wheel declares must be in the locked set already installed in the base.
  pip_in_rootfs "$rootfs" check
  rm -rf "$rootfs/tmp/wheels"
  local site packages=()
  site="$venv/lib/python$py_version/site-packages"
  mapfile -t packages < <(cat "$rootfs$site"/overlay_guard-*.dist-info/top_level.txt)
  compile_in_rootfs "$rootfs" "${packages[@]/#/$site/}"
  # The layer holds what the install added (everything in the base is at most base_epoch old), with
  # its parent directories as they are in the base.
  (cd "$rootfs" && find . ! -type d -newermt "@$base_epoch" -print0 |
    xargs -0r cp -a --parents -t "$work/layer")
  clamp_mtimes "$work/layer" "$epoch"
  # GNU tar, not `umoci insert`, whose archives (umoci 0.4.7) lack the end-of-archive blocks.
  (cd "$work/layer" && find . -mindepth 1 -maxdepth 1 -printf '%P\0' | LC_ALL=C sort -z |
    tar --null -T - --sort=name --numeric-owner --format=gnu -cf "$work/layer.tar")
  umoci raw add-layer --image "$layout:base" --history.created "$created" \
    --history.created_by "pip install overlay-guard==$version" "$work/layer.tar"

  local labels=(
    --config.label "org.opencontainers.image.title=overlay-guard"
    --config.label "org.opencontainers.image.description=$(pyproject project.description)"
    --config.label "org.opencontainers.image.version=$version"
    --config.label "org.opencontainers.image.revision=$revision"
    --config.label "org.opencontainers.image.created=$created"
    --config.label "org.opencontainers.image.licenses=$(pyproject project.license)"
    --config.label "org.opencontainers.image.base.name=debian:$suite"
  )
  if [[ -n "$source" ]]; then
    labels+=(--config.label "org.opencontainers.image.source=$source")
  else
    log "no source URL known: set OVERLAY_GUARD_IMAGE_SOURCE or [project.urls] Source in pyproject.toml"
  fi
  umoci config --image "$layout:base" --tag "$version" --no-history --created "$created" \
    --architecture amd64 --os linux \
    --config.user "$uid:$uid" --config.workingdir / \
    --config.entrypoint "$venv/bin/overlay-webhook" \
    --config.env "PATH=$venv/bin:/usr/bin:/bin" --config.env "HOME=/home/nonroot" --config.env "LANG=C.UTF-8" \
    --config.env "PYTHONDONTWRITEBYTECODE=1" --config.env "PYTHONUNBUFFERED=1" \
    --config.exposedports 9443/tcp --config.exposedports 8080/tcp \
    "${labels[@]}"
  umoci rm --image "$layout:base"
  umoci gc --layout "$layout"
  chmod -R a+rX "$layout"
  clamp_mtimes "$layout" "$epoch"
  # An oci-archive: the layout as one tar, byte-identical for identical inputs.
  tar -C "$layout" --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner --format=gnu \
    -cf "$out/image.oci.tar" .
  printf '%s\n' "$version" >"$out/version"
  rm -rf "$work"
}

# Image metadata shared by the cache key and the config: version, epoch, revision, source.
image_meta() {
  local base_epoch="$1" tops
  version="$(pyproject project.version)"
  epoch="${SOURCE_DATE_EPOCH:-$(git -C "$repo" log -1 --format=%ct 2>/dev/null || echo "$base_epoch")}"
  ((epoch >= base_epoch)) || epoch="$base_epoch"
  revision="$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)"
  mapfile -t tops < <(pyproject tool.setuptools.packages | cut -d. -f1 | sort -u)
  [[ -z "$(git -C "$repo" status --porcelain -- pyproject.toml README.md "${tops[@]}" 2>/dev/null)" ]] ||
    revision+="-dirty"
  source="${OVERLAY_GUARD_IMAGE_SOURCE:-$(pyproject project.urls.Source)}"
}

# Keeps the current entries of a stage and deletes older ones, so the cache does not grow with every edit.
prune() {
  local keep="$1" d
  for d in "$cache/$2"-*; do
    [[ "$d" == "$keep" || ! -d "$d" ]] || rm -rf "$d"
  done
}

cmd_build() {
  local started=$SECONDS
  ensure_debs mmdebstrap umoci
  check_lock
  mkdir -p "$cache"
  # Parallel builds wait for each other and then find the first one's result.
  exec 9>"$cache/.lock"
  flock 9
  local wheels bepoch bkey base key final
  wheels="$(fetch_wheels)"
  bepoch="$(base_epoch)"
  bkey="$(base_key "$bepoch")"
  base="$(build_base "$bkey" "$wheels" "$bepoch")"
  src="$(mktemp -d)"
  trap 'rm -rf "${src:?}"' EXIT
  stage_sources "$src/src"
  image_meta "$(cat "$base/epoch")"
  key="$(printf '%s\n' "$bkey" "$(tree_hash "$src/src")" "$epoch" "$revision" "$source" | sha)"
  final="$cache/final-$key"
  if [[ -f "$final/.complete" ]]; then
    log "cached: $final"
  else
    rm -rf "$final"
    mkdir -p "$final"
    build_final "$base" "$wheels" "$src/src" "$final"
    cp "$base/packages.txt" "$final/packages.txt"
    touch "$final/.complete"
  fi
  prune "$final" final
  prune "$base" base
  prune "$wheels" wheels

  local name="overlay-guard-$version" dist="$repo/dist"
  mkdir -p "$dist"
  cmp -s "$final/image.oci.tar" "$dist/$name.oci.tar" || cp "$final/image.oci.tar" "$dist/$name.oci.tar"
  cp "$final/packages.txt" "$dist/$name.debian-packages.txt"
  cp "$lock" "$dist/$name.requirements.lock"
  "$(host_python)" - "$dist/$name.oci.tar" <<'PY' >&2
import json, sys, tarfile
with tarfile.open(sys.argv[1]) as tar:
    def blob(digest):
        return tar.extractfile("./blobs/sha256/" + digest.split(":", 1)[1]).read()
    index = json.loads(tar.extractfile("./index.json").read())
    desc = index["manifests"][0]
    manifest = json.loads(blob(desc["digest"]))
    layers = sum(layer["size"] for layer in manifest["layers"])
    ref = desc.get("annotations", {}).get("org.opencontainers.image.ref.name", "")
print(f"image: {sys.argv[1]} (tag {ref})")
print(f"image: manifest digest {desc['digest']}")
print(f"image: config digest (image ID) {manifest['config']['digest']}")
print(f"image: {len(manifest['layers'])} layers, {layers / 2**20:.1f} MiB compressed")
PY
  log "archive size $(du -h --apparent-size "$dist/$name.oci.tar" | cut -f1), done in $((SECONDS - started))s"
  printf '%s\n' "$dist/$name.oci.tar"
}

cmd_runtime() {
  ensure_debs podman runc
  command -v podman
}

case "${1:-build}" in
  build) cmd_build ;;
  lock) cmd_lock ;;
  runtime) cmd_runtime ;;
  *) die "usage: hack/image.sh [build|lock|runtime]" ;;
esac
