"""Session-wide real control plane (etcd + kube-apiserver on 127.0.0.1).

Binaries come from $KUBEBUILDER_ASSETS when it holds kube-apiserver and etcd,
otherwise from hack/e2e-assets.sh, which builds them once into a cache.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from ._cluster import ControlPlane, ControlPlaneError, locate_assets, log_tail

# Remembered outside the fixture so the reporting hooks can name the logs
# even when a test fails long after setup.
_log_dirs: list[Path] = []
_apiserver_logs: list[Path] = []


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


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _log_dirs and (terminalreporter.stats.get("failed") or terminalreporter.stats.get("error")):
        terminalreporter.write_line(f"control-plane logs kept in: {', '.join(map(str, _log_dirs))}")
