"""The test-only tools hack/ builds into the cache (kubectl, helm, Karpenter's CRDs, the oracle, chromium,
promtool, Debian's shells), located once per session. A missing tool is built, never skipped: `make test`
builds them before pytest starts, so here the scripts only print their cached paths. `make check` builds
nothing: it deselects the tests marked `tools`, and sets NO_BUILDS so that an unmarked test that reaches a
build fails and names its missing marker."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.e2e import _cluster

ROOT = Path(__file__).resolve().parent.parent
HACK = ROOT / "hack"
CHART = ROOT / "charts" / "overlay-guard"
# A cold build of helm or of the control plane is slow on two cores; past this it is hung.
BUILD_TIMEOUT = 45 * 60.0
NO_BUILDS = "OVERLAY_GUARD_NO_TOOL_BUILDS"


def _refuse_under_check(what: str) -> None:
    if os.environ.get(NO_BUILDS):
        pytest.fail(f"{what} builds or installs a tool, and {NO_BUILDS} is set (`make check`): mark the test "
                    "`@pytest.mark.tools`", pytrace=False)


def built(name: str, *args: str, timeout: float = BUILD_TIMEOUT) -> str:
    """The last line hack/NAME ARGS prints: the path of what it builds or installs once into the cache."""
    _refuse_under_check(f"hack/{name}")
    done = subprocess.run(["bash", str(HACK / name), *args], capture_output=True, text=True, timeout=timeout,
                          check=False)
    if done.returncode != 0:
        pytest.fail(f"hack/{name} {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-4000:]}", pytrace=False)
    lines = done.stdout.strip().splitlines()
    assert lines, f"hack/{name} printed no path"
    return lines[-1]


@functools.cache
def kubectl() -> str:
    _refuse_under_check("the control plane's kubectl (hack/e2e-assets.sh)")
    bundled = _cluster.locate_assets() / "kubectl"
    if os.access(bundled, os.X_OK):
        return str(bundled)
    # KUBEBUILDER_ASSETS may hold only the control plane.
    found = shutil.which("kubectl")
    assert found, f"no kubectl in {bundled.parent} or on PATH"
    return found


@functools.cache
def helm() -> str:
    return built("helm.sh")


@functools.cache
def flux_build() -> str:
    """Flux's own Kustomization build (hack/flux-build/), the oracle of sources/flux.py."""
    return built("flux-build.sh")


@functools.cache
def promtool() -> str:
    return built("promtool.sh")


@functools.cache
def karpenter_crds() -> Path:
    """Directory with Karpenter's own karpenter.sh_{nodeoverlays,nodepools,nodeclaims}.yaml."""
    return Path(built("karpenter-crds.sh"))


@functools.cache
def karpenter_kwok() -> Path:
    """Karpenter's KWOK operator with the AWS provider's metrics controller; crds/ beside it holds the
    KWOKNodeClass CRD it watches."""
    return Path(built("karpenter-kwok.sh"))


@functools.cache
def cert_manager_crds() -> Path:
    """Directory with cert-manager's Certificate, Issuer and ClusterIssuer CRDs."""
    return Path(built("cert-manager-crds.sh"))


def helm_env(home: Path) -> dict[str, str]:
    """helm's caches, config and data under `home`, never the user's; no proxy for loopback."""
    env = {k: v for k, v in os.environ.items() if k not in _cluster._SCRUBBED_ENV}
    for var, sub in (("HELM_CACHE_HOME", "cache"), ("HELM_CONFIG_HOME", "config"), ("HELM_DATA_HOME", "data")):
        env[var] = str(home / sub)
    return env


def _documents(text: str) -> list[dict[str, Any]]:
    return [d for d in YAML(typ="safe", pure=True).load_all(text) if d]


def kustomize(path: Path) -> list[dict[str, Any]]:
    """`kubectl kustomize PATH` as objects."""
    done = subprocess.run([kubectl(), "kustomize", str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return _documents(done.stdout)


# The chart refuses to render without image.repository: nothing publishes the image.
IMAGE = ("--set", "image.repository=registry.example/overlay-guard")


def helm_template(home: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """`helm template overlay-guard charts/overlay-guard --namespace overlay-guard IMAGE ARGS` (ARGS may
    override IMAGE)."""
    done = subprocess.run([helm(), "template", "overlay-guard", str(CHART), "--namespace", "overlay-guard", *IMAGE,
                           *args],
                          capture_output=True, text=True, timeout=120, env=helm_env(home))
    if check:
        assert done.returncode == 0, done.stderr
    return done


def chart(home: Path, *args: str) -> list[dict[str, Any]]:
    return _documents(helm_template(home, *args).stdout)
