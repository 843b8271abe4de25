"""The committed exposition of hack/karpenter-kwok (tests/fixtures/karpenter-metrics/) against what it claims: the
versions hack/karpenter-kwok/go.mod pins, and the embedded catalog's base prices, c6i.large's adjusted by -25%."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from simulation.semantics import catalog as cat

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "karpenter-metrics"
PRICE = "karpenter_cloudprovider_instance_type_offering_price_estimate"


def test_fixture_names_the_versions_the_harness_pins() -> None:
    go_mod = (ROOT / "hack" / "karpenter-kwok" / "go.mod").read_text()
    core = re.search(r"^\tsigs\.k8s\.io/karpenter (v\S+)$", go_mod, re.M)
    aws = re.search(r"^\tgithub\.com/aws/karpenter-provider-aws (v\S+)$", go_mod, re.M)
    assert core and aws
    assert [p.name for p in FIXTURES.iterdir()] == [f"kwok-{core.group(1)}-aws-{aws.group(1)}.prom"]
    header = (FIXTURES / f"kwok-{core.group(1)}-aws-{aws.group(1)}.prom").read_text()
    assert f"sigs.k8s.io/karpenter {core.group(1)}" in header
    assert f"karpenter-provider-aws {aws.group(1)}" in header


def test_fixture_prices_are_the_catalogs_with_the_adjustment_in_effect() -> None:
    base = {t.name: price for t in cat.default().types if (price := t.offerings[0].price) is not None}
    samples = [sample for family in text_string_to_metric_families(next(FIXTURES.iterdir()).read_text())
               for sample in family.samples if sample.name == PRICE]
    assert samples
    for sample in samples:
        capacity_type, name = sample.labels["capacity_type"], sample.labels["instance_type"]
        want = 0.0 if capacity_type == "reserved" else base[name] * (0.75 if name == "c6i.large" else 1.0)
        assert abs(sample.value - (want or 0.0)) < 1e-9, sample
