"""Issue 7: the OCI image of `make image`, run by podman as the webhook, passes the admission scenarios.

The admission scenarios (_admission.py, collected by test_admission.py) run again here with the API
server calling the container instead of the `python -m webhook` process: this module's `guard` is the
session's, routed to the image.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterator

import pytest

from . import _admission, _image
from ._cluster import REPO_ROOT, ControlPlaneError
from ._guard import Guard

pytestmark = pytest.mark.e2e

# What a container runtime could start as a shell, if the image shipped one.
SHELLS = frozenset(f"{d}/{sh}" for d in ("bin", "usr/bin", "sbin", "usr/sbin")
                   for sh in ("sh", "bash", "dash", "ash", "busybox"))

# The admission scenarios, collected again in this module so they run against the image.
globals().update(_admission.SCENARIOS)


@pytest.fixture(scope="module")
def image() -> _image.Image:
    try:
        return _image.build()
    except ControlPlaneError as exc:
        pytest.fail(f"the image could not be built or loaded:\n{exc}", pytrace=False)


@pytest.fixture(scope="module")
def guard(guard: Guard, image: _image.Image) -> Iterator[Guard]:
    """The session's guard with the API server calling the image's container instead."""
    hook = _image.ImageWebhook(guard.plane, guard.certs, "image", image)
    # Among the extras, its log joins a failing test's report and the session's teardown stops it.
    guard.extra.append(hook)
    try:
        hook.start()
    except ControlPlaneError as exc:
        hook.stop()
        pytest.fail(f"the image's webhook did not start:\n{exc}", pytrace=False)
    try:
        with guard.routed_to(hook):
            yield guard
    finally:
        hook.stop()


def _container(guard: Guard) -> _image.ImageWebhook:
    return next(h for h in guard.extra if isinstance(h, _image.ImageWebhook) and h.running)


def test_image_config_runs_the_webhook_as_a_non_root_user(image: _image.Image) -> None:
    config = image.config["config"]
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]

    assert config["Entrypoint"] == ["/opt/overlay-guard/bin/overlay-webhook"]
    assert config["User"] == "65532:65532"
    assert config["Labels"]["org.opencontainers.image.version"] == project["version"]
    assert config["Labels"]["org.opencontainers.image.revision"]
    assert "9443/tcp" in config["ExposedPorts"]
    paths = set(_image.layer_paths(image))
    assert config["Entrypoint"][0].lstrip("/") in paths
    assert not SHELLS & paths, "the image ships a shell"


def test_the_container_answers_reviews_as_the_image_user(guard: Guard, image: _image.Image) -> None:
    container = _container(guard)
    before = container.admissions()

    done, notes = guard.probe()

    assert done.returncode == 0, done.stderr
    assert any(k.startswith("overlay-guard.io/") for k in notes)
    assert container.admissions() > before
    assert container.process_ids() == (65532, 65532)


def test_the_dockerfile_agrees_with_the_image(image: _image.Image) -> None:
    # The Dockerfile is the alternative for a Docker engine; what a Deployment relies on must match.
    instructions = [line.split(None, 1) for line in (REPO_ROOT / "Dockerfile").read_text().splitlines()
                    if line and not line.startswith((" ", "#"))]
    last = {word.upper(): rest.strip() for word, rest in instructions}
    config = image.config["config"]

    assert last["USER"] == config["User"]
    assert json.loads(last["ENTRYPOINT"]) == config["Entrypoint"]
