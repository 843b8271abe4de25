"""Fixtures shared by the test modules. Plain helpers live in modules tests import (core_support,
lint_support, input_support, schema_support, webhook_support, strategies, casefmt, tools); no test module
imports another."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Iterator

import pytest
from hypothesis import settings

from simulation.semantics import catalog as cat
from tests import core_support, lint_support

# Hypothesis' profiles, chosen by HYPOTHESIS_PROFILE. `ci` (make check, make test) is a quarter of Hypothesis'
# default and derandomized, so that a run answers fast and the same way twice; `soak` (make soak) is ten times the
# default, with fresh examples each run. A test that asks for more or fewer examples than the default scales its
# number from the profile (strategies.examples). No deadline: a slow, shared machine is not a failure.
settings.register_profile("ci", max_examples=25, deadline=None, derandomize=True)
settings.register_profile("soak", max_examples=1000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session", autouse=True)
def render_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[pathlib.Path]:
    """kustomize renders are cached in a directory of the session, never the user's cache."""
    where = tmp_path_factory.mktemp("render-cache")
    before = os.environ.get("OVERLAY_GUARD_RENDER_CACHE")
    os.environ["OVERLAY_GUARD_RENDER_CACHE"] = str(where)
    yield where
    if before is None:
        del os.environ["OVERLAY_GUARD_RENDER_CACHE"]
    else:
        os.environ["OVERLAY_GUARD_RENDER_CACHE"] = before


@pytest.fixture(scope="session")
def default_catalog() -> cat.Catalog:
    """The embedded AWS us-east-1 catalog, parsed once per session."""
    return cat.default()


@pytest.fixture(scope="session")
def small_catalog() -> cat.Catalog:
    """Three hand-made instance types (see core_support.small_catalog)."""
    return core_support.small_catalog()


@pytest.fixture
def fake_cluster(tmp_path: pathlib.Path) -> Iterator[lint_support.Cluster]:
    """The list API of a cluster, faked: (kubeconfig path, handler class whose `pages` the test fills)."""
    with lint_support.fake_api(tmp_path) as cluster:
        yield cluster
