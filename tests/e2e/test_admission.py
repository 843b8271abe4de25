"""Issue 4, scenarios 1-5: what a user sees from `kubectl` with overlay-guard registered (the scenarios
live in _admission.py; test_image.py runs them again against the OCI image)."""

from __future__ import annotations

import pytest

from . import _admission

pytestmark = pytest.mark.e2e

# Collected here in the order they are written.
test_1_valid_overlay_is_annotated = _admission.test_1_valid_overlay_is_annotated
test_2_same_weight_conflict_is_refused = _admission.test_2_same_weight_conflict_is_refused
test_2_admitted_dry_run_leaves_nothing_behind = _admission.test_2_admitted_dry_run_leaves_nothing_behind
test_3_update_introducing_a_conflict_is_refused_and_a_new_weight_admitted = (
    _admission.test_3_update_introducing_a_conflict_is_refused_and_a_new_weight_admitted)
test_4_invalid_dra_is_refused_with_its_reason = _admission.test_4_invalid_dra_is_refused_with_its_reason
test_5_nodepool_change_creating_a_conflict_is_admitted_with_a_warning = (
    _admission.test_5_nodepool_change_creating_a_conflict_is_admitted_with_a_warning)
