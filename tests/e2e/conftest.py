"""Session-wide real control plane (etcd + kube-apiserver on 127.0.0.1).

Binaries come from $KUBEBUILDER_ASSETS when it holds kube-apiserver and etcd,
otherwise from hack/e2e-assets.sh, which builds them once into a cache.
"""

from __future__ import annotations

import subprocess
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from . import _crds
from ._cluster import ControlPlane, ControlPlaneError, locate_assets, log_tail
from ._guard import Guard, delete_labelled, issue_certs, unique

# Remembered outside the fixture so the reporting hooks can name the logs
# even when a test fails long after setup.
_log_dirs: list[Path] = []
_apiserver_logs: list[Path] = []
_guards: list[Guard] = []


def pytest_configure(config: pytest.Config) -> None:
    # Also declared in pyproject.toml; repeated so this directory runs clean
    # under --strict-markers from any rootdir.
    config.addinivalue_line("markers", "e2e: drives a real kube-apiserver")


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A running control plane; see ControlPlane for the attributes tests use."""
    assets = locate_assets()
    workdir = tmp_path_factory.mktemp("control-plane")
    # Registered before starting so a failed start still points at its logs.
    _log_dirs.append(workdir / "logs")
    _apiserver_logs.append(workdir / "logs" / "kube-apiserver.log")
    try:
        plane = ControlPlane.start(assets, workdir)
    except ControlPlaneError as exc:
        pytest.fail(f"control plane did not start (logs in {workdir / 'logs'}):\n{exc}", pytrace=False)
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="session")
def crds(control_plane: ControlPlane) -> _crds.Crds:
    """Karpenter's own CRDs installed; see `dra_crd` for the project's extended NodeOverlay CRD."""
    try:
        installed = _crds.Crds(control_plane)
        installed.use(_crds.KARPENTER)
    except (ControlPlaneError, subprocess.CalledProcessError) as exc:
        pytest.fail(f"Karpenter's CRDs could not be installed:\n{exc}", pytrace=False)
    return installed


@pytest.fixture(scope="session")
def guard(control_plane: ControlPlane, crds: _crds.Crds,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Guard]:
    """Karpenter's CRDs installed, the webhook running (`python -m webhook`) and registered by URL."""
    certs = issue_certs(tmp_path_factory.mktemp("certs"))
    running = Guard(control_plane, certs)
    _guards.append(running)
    try:
        # The guard's namespace, as the manifests create it: the admissions ledger's Lease lives there.
        control_plane.kubectl("create", "namespace", "overlay-guard", check=False)
        running.webhook.start()
        running.route_to(running.webhook)
    except ControlPlaneError as exc:
        running.stop_all()
        pytest.fail(f"overlay-guard did not start (logs in {control_plane.log_dir}):\n{exc}", pytrace=False)
    try:
        yield running
    finally:
        running.stop_all()


def _swap(crds: _crds.Crds, guard: Guard, which: str) -> None:
    if crds.current == which:
        return
    crds.use(which)
    # A CRD update ends the API server's watches of its objects; the webhooks re-list, and judge by the
    # new CRD once they have followed it.
    for hook in (guard.webhook, *guard.extra):
        if hook.running:
            hook.wait_ready()
            hook.wait_crd()


@pytest.fixture
def dra_crd(crds: _crds.Crds, guard: Guard) -> None:
    """The project's DRA-extended NodeOverlay CRD in place of Karpenter's, installed with the opt-in
    command of docs/webhook.md; the next test without this fixture gets Karpenter's back."""
    _swap(crds, guard, _crds.DRA)


@pytest.fixture(autouse=True)
def _karpenter_crds_unless_dra(request: pytest.FixtureRequest) -> None:
    # Swapping only on a change keeps consecutive DRA tests on one swap, whatever the order.
    if "guard" in request.fixturenames and "dra_crd" not in request.fixturenames:
        _swap(request.getfixturevalue("crds"), request.getfixturevalue("guard"), _crds.KARPENTER)


@pytest.fixture
def label(guard: Guard) -> Iterator[str]:
    """A value for the test label: every object carrying it is deleted after the test."""
    value = unique("t")
    yield value
    delete_labelled(guard.plane, value)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, None]:
    outcome = yield
    report = outcome.get_result()
    if report.failed and _log_dirs and "control_plane" in getattr(item, "fixturenames", ()):
        report.sections.append(
            (
                "control plane",
                f"logs in {_log_dirs[-1]}\n--- kube-apiserver tail ---\n{log_tail(_apiserver_logs[-1], 20)}",
            )
        )
    if report.failed and _guards and "guard" in getattr(item, "fixturenames", ()):
        for path in _guards[-1].logs():
            report.sections.append((f"webhook log {path.name}", log_tail(path, 20)))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _log_dirs and (terminalreporter.stats.get("failed") or terminalreporter.stats.get("error")):
        terminalreporter.write_line(f"control-plane logs kept in: {', '.join(map(str, _log_dirs))}")
