"""The finding codes: the one list the severities, the SARIF rules, the output schema and docs/cli.md's
table are made from (docs/design.md). A code missing here cannot be reported: `get` raises."""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Mapping, Sequence


class Severity(enum.IntEnum):
    # Ordered so that comparisons express "at or above --fail-on".
    INFO = 0
    WARNING = 1
    ERROR = 2

    def __str__(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Severity:
        return cls[text.upper()]


@dataclasses.dataclass(frozen=True)
class Code:
    """One stable code of the contract (docs/design.md §5)."""

    code: str
    severity: Severity
    # The code table's "when" column (Markdown).
    when: str
    # SARIF shortDescription: one plain line.
    short: str
    # SARIF fullDescription: what the problem means for Karpenter.
    full: str
    # SARIF help: what to change.
    help: str


_E, _W = Severity.ERROR, Severity.WARNING

ALL: Sequence[Code] = (
    Code("parse-error", _E,
         "YAML/JSON that cannot be read (syntax, encoding, alias bombs, nesting, size), or a field of the wrong "
         "type (a list where `kind` belongs; an unquoted YAML boolean or number where a string belongs)",
         "YAML or JSON input that cannot be read, or a field of the wrong type",
         "The input is not well-formed YAML or JSON, exceeds an input limit, or holds a value of the wrong type "
         "where the API server needs another; kubectl would refuse to apply it.",
         "Fix the syntax at the position shown; quote values such as on, yes or 10 where a string belongs."),
    Code("unreadable-input", _E,
         "a path inside a given directory that cannot be read (dangling symlink, permission, FIFO, device); the "
         "rest is still linted and the run exits 2",
         "A path inside a given directory that cannot be read (dangling link, permission, FIFO)",
         "A file under a directory given on the command line could not be read; the other files were linted, "
         "but the result is incomplete.",
         "Remove the dangling link or special file, or make the file readable, then lint again."),
    Code("cluster-discovery", _E,
         "a cluster the repository declares cannot be read whole: a Flux or Argo CD path or a `.overlay-lint.yaml` "
         "path that does not exist, two clusters of one name, a cycle of kustomizations; the other clusters are "
         "still judged",
         "A cluster the repository declares cannot be read whole",
         "A Flux Kustomization, Argo CD Application, `.overlay-lint.yaml` entry or kustomization declares a "
         "cluster whose objects cannot all be found, so that cluster is judged without them (or not at all).",
         "Fix the path or name at the position shown, or declare the clusters in .overlay-lint.yaml."),
    Code("schema", _E,
         "the API server would reject it: the CRD schema or its CEL rules",
         "The API server would reject the object (CRD schema or CEL rules)",
         "The object breaks the NodeOverlay CRD's OpenAPI schema or one of its CEL validation rules, so the "
         "API server refuses to store it.",
         "Change the field named in the message to what the CRD allows."),
    Code("runtime-invalid", _E,
         "the API server accepts it, Karpenter's runtime validation marks it Invalid and ignores it whole",
         "Karpenter's runtime validation marks the overlay Invalid and ignores it",
         "The API server stores the overlay, but Karpenter's own validation rejects it: the overlay is marked "
         "Invalid and none of its fields takes effect.",
         "Change the field named in the message so that Karpenter's runtime validation accepts it."),
    Code("duplicate-object", _E,
         "two inputs with the same kind and name",
         "Two inputs with the same kind and name",
         "Two input documents describe the same object; only one of them can exist in a cluster, so the result "
         "depends on which is applied last.",
         "Rename one of the objects or remove the duplicate document."),
    Code("same-weight-conflict", _E,
         "two overlays of equal weight set the same field on a common cell",
         "Two overlays of equal weight set the same field on a common cell",
         "Two overlays with the same weight both set the price or the same capacity resource on at least one "
         "(NodePool, instance type, offering); which value wins depends on overlay names, and Karpenter may "
         "mark one overlay Conflict.",
         "Give one overlay a different weight, or narrow its requirements so the two match disjoint cells."),
    Code("invalid-binding-key", _E,
         "a bindingKey rule is broken",
         "A bindingKey rule is broken",
         "A device attribute's bindingKey breaks one of its rules (a DNS label, on at least two devices of "
         "the overlay, under one attribute name, without a concrete value), so it binds nothing as written.",
         "Use one DNS-label bindingKey on at least two devices of this overlay, under one attribute name."),
    Code("invalid-attribute-binding", _E,
         "an attributeBindings rule is broken",
         "An attributeBindings rule is broken",
         "An attributeBindings entry breaks one of its rules (at least two deviceSelectors naming templates "
         "and devices of this overlay, qualified attribute names, agreeing concrete values).",
         "Correct the attributeBindings entry named in the message."),
    Code("invalid-resource-slice-template", _E,
         "template structure: driver, names, limits, nodeSelector, excluded fields",
         "ResourceSliceTemplate structure is invalid",
         "A resourceSliceTemplate has an invalid driver, device or attribute name, exceeds a limit, or uses a "
         "field that templates exclude.",
         "Correct the template field named in the message."),
    Code("legacy-field", _E,
         "a shape from the first NodeOverlay RFC, with the migration",
         "A field from the first NodeOverlay RFC, with its migration",
         "The object uses a field shape from the first NodeOverlay RFC that the current API no longer accepts.",
         "Migrate the field as the message describes."),
    Code("hugepages-exhaust-memory", _E,
         "an overlay's hugepages leave an instance type it selects with no allocatable memory",
         "Hugepages leave an instance type with no allocatable memory",
         "Karpenter takes every hugepages-* capacity of an instance type off its allocatable memory and clamps "
         "the result at 0; on these types the hugepages in effect use all of it, so no pod that requests "
         "memory fits and Karpenter will not launch them for such pods.",
         "Lower the hugepages, or add a requirement that keeps the overlay off the instance types named."),
    Code("no-match", _W,
         "the overlay matches no cell (with a typo hint where a near label exists)",
         "The overlay matches no NodePool, instance type and offering",
         "No (NodePool, instance type, offering) satisfies the overlay's requirements, so it changes nothing.",
         "Check the requirement keys and values for typos; the message names a near label where one exists."),
    Code("shadowed", _W,
         "every cell of one of its fields is won by a higher-precedence overlay",
         "A field of the overlay is won everywhere by a higher-precedence overlay",
         "Every cell where the overlay sets this field is already set by an overlay with a higher weight or, "
         "at equal weight, a later name: the field has no effect.",
         "Raise the overlay's weight, remove the field, or narrow the overlay that wins."),
    Code("unknown-label", _W,
         "a requirement key no instance type or NodePool defines; an error where it is certainly undefined (every "
         "NodePool known, and a key of the provider's own label domain it does not define)",
         "A requirement key that no instance type or NodePool defines",
         "A requirement uses a label key that neither the instance types nor the NodePools define, so the "
         "requirement can only match through NotIn or DoesNotExist.",
         "Correct the key, or define the label on the NodePools it is meant to select."),
    Code("possible-conflict", _W,
         "same-weight overlays that set the same field and whose requirements can overlap, where the catalog "
         "lacks a label one of them needs (another cloud's, a label of the user's own): the conflict test cannot "
         "place them",
         "Same-weight overlays that may conflict where the catalog cannot tell",
         "The two overlays have the same weight, set the same field and have requirements that can hold "
         "together, but one of them needs a label the catalog does not define, so whether they meet on a node "
         "cannot be checked: in the cluster, Karpenter may mark one Conflict.",
         "Lint against a catalog of your cloud and region (--catalog, --region), or give the two overlays "
         "different weights or disjoint requirements."),
    Code("binding-key-scope", _W,
         "the same bindingKey in two overlays",
         "The same bindingKey in two overlays binds nothing",
         "A bindingKey binds devices only within one overlay's templates; the same key in two overlays does "
         "not bind them together.",
         "Move the templates that must share devices into one overlay, or use distinct keys."),
    Code("nodepool-weight-tie", _W,
         "two NodePools with equal weight can launch the same instance type/offering; Karpenter tries the "
         "name later in the alphabet first",
         "Two NodePools with equal weight can launch the same offering: Karpenter picks one by name",
         "Two NodePools of equal weight can launch the same instance type and offering. Karpenter orders "
         "NodePools by weight, then by name descending, so it tries the one whose name sorts later first: "
         "which one launches, and which overlays apply, is decided by a name, not by price or intent.",
         "Give the NodePools distinct weights (the one to try first the higher) or make their requirements "
         "disjoint."),
    Code("fractional-extended-resource", _W,
         "an overlay gives an extended resource a fraction (500m), which no pod can request",
         "An extended resource in spec.capacity is not a whole number",
         "Kubernetes counts extended resources in whole units: a pod requesting a fraction is refused and a "
         "device plugin advertises whole devices. Karpenter takes the fraction as given, so its simulation counts "
         "capacity no node will have (500m fits no pod that asks for 1).",
         "Give a whole number (e.g. \"1\")."),
    Code("price-on-every-type", _W,
         "an absolute spec.price that applies to every instance type of the catalog",
         "A fixed price applies to every instance type",
         "spec.price replaces the price of every offering the overlay matches; matching every instance type makes "
         "them all cost the same, so Karpenter can no longer prefer cheaper types: almost always missing "
         "requirements.",
         "Add requirements that select the instance types the price is for, or use a priceAdjustment."),
    Code("price-clamped", _W,
         "an adjustment drives some offering's price below 0",
         "A price adjustment drives some offering's price below 0",
         "A priceAdjustment would make an offering's price negative; Karpenter clamps it to 0, which makes "
         "the offering look free.",
         "Use a smaller adjustment or a fixed price."),
    Code("hugepages-most-memory", _W,
         "an overlay's hugepages take more than half, but not all, of an instance type's allocatable memory",
         "Hugepages take more than half of an instance type's allocatable memory",
         "Karpenter takes every hugepages-* capacity of an instance type off its allocatable memory; on these "
         "types the hugepages in effect take more than half of it, which leaves little for pods that request "
         "ordinary memory.",
         "Check that the hugepages are meant for these instance types, or keep the overlay off the smaller ones."),
    Code("on-demand-below-spot", _W,
         "a price overlay makes on-demand cheaper than spot for a type a NodePool launches both ways, judged on "
         "prices read from data only ([aws/karpenter-provider-aws#8704]"
         "(https://github.com/aws/karpenter-provider-aws/issues/8704))",
         "A price overlay makes on-demand cheaper than spot where a NodePool launches both",
         "Karpenter ranks instance types by price; once an on-demand discount takes on-demand below spot for a "
         "type the NodePool offers both ways, Karpenter picks types by the discounted on-demand price but still "
         "launches spot, and the NodeClaims can fail with InsufficientCapacityError "
         "(https://github.com/aws/karpenter-provider-aws/issues/8704).",
         "Scope the discount to on-demand-only NodePools, add karpenter.sh/capacity-type NotIn [spot] to the "
         "NodePool, or lower the discount so that spot stays the cheaper."),
    Code("hugepages-below-nodepool-memory", _W,
         "an overlay's hugepages leave a type less allocatable memory than the NodePool's memory floor (its "
         "`instance-memory` Gt/Gte requirement) ([kubernetes-sigs/karpenter#3297]"
         "(https://github.com/kubernetes-sigs/karpenter/issues/3297))",
         "Hugepages leave a type less allocatable memory than the NodePool asks for",
         "A NodePool that requires instance types with more than some memory (karpenter.k8s.aws/instance-memory "
         "Gt or Gte) is sized for pods that need it; the hugepages in effect leave some of its types less "
         "allocatable memory than that floor, so pods sized to it no longer fit there and Karpenter launches "
         "larger types or none (https://github.com/kubernetes-sigs/karpenter/issues/3297).",
         "Lower the hugepages, keep the overlay off the types named, or raise the NodePool's memory floor."),
    Code("preview-price-by-name", _W,
         "two single-requirement `node.kubernetes.io/instance-type In` overlays with an absolute price name one "
         "type without a published price at different weights: the AWS provider takes the one last by name as the "
         "type's base price ([aws/karpenter-provider-aws#9249]"
         "(https://github.com/aws/karpenter-provider-aws/pull/9249))",
         "The AWS provider prices a preview type by the overlay last in name order",
         "For an instance type the pricing API does not list (a preview type), the AWS provider (v1.14 and later) "
         "takes the price of NodeOverlays with only a node.kubernetes.io/instance-type In requirement and an "
         "absolute price, listed by name, the last one winning whatever the weights; Karpenter then applies the "
         "overlays by weight on top, so the type's base price is not the one the weights say "
         "(https://github.com/aws/karpenter-provider-aws/pull/9249).",
         "Price a preview type with one such overlay, or give the highest-weight one the name that sorts last."),
    Code("price-metric-flips", Severity.INFO,
         "a price overlay applies to an offering in some of the NodePools that launch it: Karpenter's "
         "`offering_price_estimate` metric swings between their prices ([kubernetes-sigs/karpenter#3070]"
         "(https://github.com/kubernetes-sigs/karpenter/issues/3070))",
         "A NodePool-scoped price overlay makes Karpenter's price metric swing",
         "Karpenter publishes one karpenter_cloudprovider_instance_type_offering_price_estimate per instance type, "
         "zone and capacity type, written from each NodePool's instance types in turn; an overlay that prices an "
         "offering in some NodePools only makes the series swing between their prices "
         "(https://github.com/kubernetes-sigs/karpenter/issues/3070, "
         "https://github.com/aws/karpenter-provider-aws/issues/9222).",
         "Select the offering in every NodePool that launches it, or read prices per NodePool, not from the metric."),
    Code("ignored-values", _W,
         "Exists/DoesNotExist with values, which Karpenter ignores",
         "Exists/DoesNotExist with values, which Karpenter ignores",
         "A requirement with operator Exists or DoesNotExist lists values; Karpenter ignores them, so the "
         "requirement is broader than it reads.",
         "Remove the values, or use In or NotIn if the values matter."),
)

BY_CODE: Mapping[str, Code] = {c.code: c for c in ALL}

_NAME = re.compile(r"[a-z]+(-[a-z]+)*")


def get(code: str) -> Code:
    """The code's entry; an unknown code is a programming error, never a silent default."""
    try:
        return BY_CODE[code]
    except KeyError:
        raise KeyError(f"unknown finding code {code!r}: add it to simulation/codes.py") from None


def _check(codes: Sequence[Code]) -> None:
    names = [c.code for c in codes]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate finding codes in {names}")
    for c in codes:
        if not _NAME.fullmatch(c.code):
            raise ValueError(f"finding code {c.code!r} is not kebab-case")
        if not all((c.when, c.short, c.full, c.help)) or "\n" in c.short or "|" in c.when:
            raise ValueError(f"finding code {c.code!r}: every description is one non-empty line, no '|'")


_check(ALL)
