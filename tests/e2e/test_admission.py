"""Issue 4, scenarios 1-5: what a user sees from `kubectl` with overlay-guard registered (the scenarios
live in _admission.py; test_image.py runs them again against the OCI image)."""

from __future__ import annotations

import pytest

from . import _admission

pytestmark = pytest.mark.e2e

# Collected here in the order they are written.
globals().update(_admission.SCENARIOS)
