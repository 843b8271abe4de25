"""The schema layer follows the CRD it is given: Karpenter's own (no DRA extension, the default), the embedded
DRA-extended one (`--crd dra`), or any other NodeOverlay CRD, whose CEL rules are evaluated by the CEL library
with no rule-specific code."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from simulation import findings
from simulation.evaluate import Document, check_overlay
from simulation.validation import celexpr, crds, schema
from tests import tools
from tests.schema_support import edit, valid, with_edits

REF = findings.ObjectRef("NodeOverlay", "test")
DRA_CODES = {"invalid-binding-key", "invalid-attribute-binding", "invalid-resource-slice-template"}


ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def shipped() -> dict[str, Any]:
    """Karpenter's NodeOverlay CRD as its release ships it (hack/karpenter-crds.sh, cached)."""
    path = Path(tools.karpenter_crds()) / "karpenter.sh_nodeoverlays.yaml"
    loaded: dict[str, Any] = YAML(typ="safe", pure=True).load(path.read_text())
    return loaded


@pytest.fixture(scope="module")
def karpenter() -> crds.Crd:
    return crds.karpenter()


def plain() -> dict[str, Any]:
    """valid() without the DRA extension: valid under either CRD."""
    obj = valid()
    del obj["spec"]["dynamicResources"]
    return obj


def fields(found: list[findings.Finding]) -> set[tuple[str, str]]:
    return {(f.code, f.field) for f in found}


# --- Karpenter's own CRD ----------------------------------------------------------------------------

def _openapi(raw: Mapping[str, Any]) -> Any:
    [version] = [v for v in raw["spec"]["versions"] if v["name"] == crds.VERSION]
    return version["schema"]["openAPIV3Schema"]


@pytest.mark.tools
def test_the_default_crd_is_karpenter_own_as_shipped(shipped: dict[str, Any]) -> None:
    # Derived from the DRA-extended CRD by removing the extension: nothing else may differ.
    assert _openapi(crds.raw_karpenter()) == _openapi(shipped)
    assert crds.karpenter().origin.endswith(crds.KARPENTER_RELEASE)


def test_the_release_is_the_one_the_oracle_and_the_crd_fetcher_pin() -> None:
    release = crds.KARPENTER_RELEASE
    assert f"sigs.k8s.io/karpenter {release}\n" in (ROOT / "hack/karpenter-oracle/go.mod").read_text()
    assert f'version="${{KARPENTER_VERSION:-{release}}}"' in (ROOT / "hack/karpenter-crds.sh").read_text()


def test_karpenter_crd_is_the_dra_one_without_the_extension(karpenter: crds.Crd) -> None:
    assert karpenter.defines("spec", "requirements") and not karpenter.defines(*crds.DRA_FIELD)
    assert crds.dra().defines(*crds.DRA_FIELD)
    assert karpenter.unchecked() == []
    assert {r.text for r in karpenter.rules()} < {r.text for r in crds.dra().rules()}
    # No rule or required entry of the extension is left behind.
    assert "dynamicResources" not in str(crds.raw_karpenter()) and "dynamicResources" in str(crds.raw_dra())


def test_dynamic_resources_under_karpenter_crd_is_one_schema_error_saying_how_to_choose_the_extension() -> None:
    # The default CRD, through the whole per-object check.
    found = check_overlay(Document(valid(), 0)).findings
    assert fields(list(found)) == {("schema", "spec.dynamicResources")} and len(found) == 1
    [f] = found
    assert f.severity == findings.Severity.ERROR
    # The hint names the ways to choose it, and each exists.
    assert "--crd dra" in f.hint and "manifests/components/dra-crd" in f.hint and "draCRD.enabled=true" in f.hint
    assert (ROOT / "manifests/components/dra-crd/kustomization.yaml").is_file()
    assert "draCRD:\n  enabled: false" in (ROOT / "charts/overlay-guard/values.yaml").read_text()


def test_dra_checks_run_only_where_the_crd_defines_the_field(karpenter: crds.Crd) -> None:
    # A bindingKey used once breaks a DRA rule; under Karpenter's CRD only the unknown field is reported.
    obj = with_edits(("spec.dynamicResources.resourceSliceTemplates[1].spec.devices", [{"name": "nic-0"}]))
    doc = Document(obj, 0)
    assert {f.code for f in check_overlay(doc, crds.dra()).findings} & DRA_CODES
    found = check_overlay(doc, karpenter).findings
    assert {(f.code, f.field) for f in found} == {("schema", "spec.dynamicResources")}


@pytest.mark.parametrize(("dotted", "value", "expected"), [
    ("spec.requirements[0].key", "karpenter.sh/foo", ("schema", "spec.requirements[0].key")),
    ("spec.requirements[1].values", ["-1"], ("schema", "spec.requirements[1]")),
    ("spec.requirements[2].values", [], ("schema", "spec.requirements[2]")),
    ("spec.capacity", {"cpu": "1"}, ("schema", "spec.capacity.cpu")),
    ("spec.price", "1.5", ("schema", "spec")),
    ("spec.wieght", 1, ("schema", "spec.wieght")),
    ("spec.resourceSlices", [], ("schema", "spec.resourceSlices")),
])
def test_both_crds_give_the_same_findings_outside_the_extension(karpenter: crds.Crd, dotted: str, value: Any,
                                                                expected: tuple[str, str]) -> None:
    answers = [fields(schema.check(edit(plain(), dotted, value), REF, None, crd))
               for crd in (karpenter, crds.dra())]
    assert answers == [{expected}, {expected}]


def test_no_draft_dra_name_is_suggested_where_the_crd_has_no_dra_field(karpenter: crds.Crd) -> None:
    found = schema.check(edit(plain(), "spec.resourceSlices", []), REF, None, karpenter)
    assert "did you mean" not in found[0].message


# --- loading a CRD ----------------------------------------------------------------------------------

def _crd(**changes: Any) -> dict[str, Any]:
    raw = copy.deepcopy(dict(crds.raw_dra()))
    for dotted, value in changes.items():
        node: Any = raw
        *parents, last = dotted.split("__")
        for part in parents:
            node = node[int(part) if part.isdigit() else part]
        node[last] = value
    return raw


@pytest.mark.parametrize("raw", [
    None, [], {"kind": "ConfigMap"},
    _crd(spec__names__kind="NodePool"), _crd(spec__group="example.com"),
    _crd(spec__versions=[]), _crd(spec__versions__0__name="v1"), _crd(spec__versions__0__schema={}),
])
def test_what_is_not_a_nodeoverlay_crd_is_refused_with_a_reason(raw: Any) -> None:
    with pytest.raises(crds.CrdError, match=r"^given: "):
        crds.load(raw, "given")


# --- rules the CRD brings: evaluated as the API server does -----------------------------------------

def _with_spec_rules(*rules: Mapping[str, Any]) -> crds.Crd:
    raw = _crd()
    spec = raw["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec["x-kubernetes-validations"] = [*spec["x-kubernetes-validations"], *rules]
    return crds.load(raw, "test")


def _spec_findings(crd: crds.Crd, **spec: Any) -> list[findings.Finding]:
    obj = plain()
    obj["spec"].update(spec)
    return [f for f in schema.check(obj, REF, None, crd) if f.code == "schema"]


def test_a_new_rule_applies_with_no_code_change() -> None:
    crd = _with_spec_rules({"rule": "!has(self.weight) || self.weight <= 100", "message": "weight at most 100"})
    assert _spec_findings(crd, weight=100) == []
    found = _spec_findings(crd, weight=101)
    assert [(f.field, f.message) for f in found] == [("spec", "spec: weight at most 100")]


def test_message_expression_field_path_and_default_message() -> None:
    crd = _with_spec_rules(
        {"rule": "self.weight < 50", "messageExpression": "'weight ' + string(self.weight) + ' is too high'",
         "fieldPath": ".weight"},
        {"rule": "self.weight < 40"},
        {"rule": "self.weight < 30", "message": "fallback", "messageExpression": "self.nothing"})
    found = {f.message for f in _spec_findings(crd, weight=60)}
    assert found == {"spec.weight: weight 60 is too high", "spec: failed rule: self.weight < 40",
                     "spec: fallback"}


def test_an_evaluation_error_rejects_with_the_rule_message_and_the_error() -> None:
    obj = with_edits(("spec.requirements[0].values", None))  # In without values: CEL's "no such key"
    found = schema.check(obj, REF, None, crds.dra())
    assert [f.field for f in found] == ["spec.requirements[0]"]
    assert "must have a value defined" in found[0].message and "no such key" in found[0].message


@pytest.mark.parametrize(("rule", "why"), [
    ("self.weight == oldSelf.weight", "transition rule"),
    ("isQuantity(self.price)", "isQuantity"),
    ("self.all(x, ", "does not compile"),
])
def test_rules_the_guard_cannot_evaluate_are_listed_never_guessed(rule: str, why: str) -> None:
    crd = _with_spec_rules({"rule": rule, "message": "m"})
    assert [w for r, w in crd.unchecked() if r == rule and why in w]
    assert _spec_findings(crd, weight=1) == []


@pytest.mark.parametrize(("rule", "value", "holds"), [
    # Go's strconv.ParseInt: no spaces, underscores or non-ASCII digits; a sign is fine.
    ("int(self) >= 0", "+5", True), ("int(self) >= 0", " 5", False), ("int(self) >= 0", "1_000", False),
    ("int(self) >= 0", "\u0663", False), ("int(self) >= 0", "9223372036854775808", False),
    # RE2: `$` only at the very end.
    ("self.matches('^[a-z]+$')", "abc\n", False), ("self.find('^([^/]+)') == 'a.b'", "a.b/c", True),
    ("self.find('x') == ''", "abc", True), ("self.findAll('[0-9]') == ['1', '2']", "a1b2", True),
    # The strings extension counts code points.
    ("self.indexOf('/') == 2", "\u00fc\u00fc/x", True), ("self.lastIndexOf('a') == 2", "aba", True),
    ("self.lowerAscii() == 'abc'", "ABC", True), ("self.split('/') == ['a', 'b']", "a/b", True),
    ("[3, 1].isSorted() == false && [1, 3].sum() == 4 && [1, 3].indexOf(3) == 1", "", True),
])
def test_kubernetes_extension_functions(rule: str, value: str, holds: bool) -> None:
    assert (celexpr.evaluate(celexpr.compile_expression(rule), {"self": value}) is True) == holds


def test_past_a_size_limit_no_rule_is_evaluated() -> None:
    # 5,000 requirements, each breaking a rule: the API server stops at maxItems, and so does the guard
    # (the CRD's size limits are what bound the rules' cost).
    obj = with_edits(("spec.requirements", [{"key": "a", "operator": "In"}] * 5000))
    assert fields(schema.check(obj, REF, None, crds.dra())) == {("schema", "spec.requirements")}
    obj = with_edits(("spec.requirements", [{"key": "a", "operator": "In"}] * 100))
    assert len(schema.check(obj, REF, None, crds.dra())) == 100


def test_a_value_the_library_cannot_take_fails_the_rule_never_the_caller() -> None:
    expression = celexpr.compile_expression("self.x == 1")
    assert isinstance(celexpr.evaluate(expression, {"self": {"x": object()}}), celexpr.Failure)
    assert celexpr.evaluate(expression, {"self": {"x": 1}}) is True


def test_rules_compile_once_per_crd_never_per_check(monkeypatch: pytest.MonkeyPatch) -> None:
    crd = crds.dra()
    compiled: list[str] = []
    real = celexpr.compile_expression
    monkeypatch.setattr(celexpr, "compile_expression", lambda source: compiled.append(source) or real(source))
    assert schema.check(valid(), REF, None, crd) == [] and compiled == []
    crds.load(crds.raw_dra(), "again")
    assert len(compiled) >= len(crd.rules())


# --- the front ends: `overlay-lint --crd`, the cluster's CRD, `overlay-webhook --crd` ----------------

def _lint(*args: str) -> tuple[int, dict[str, Any], str]:
    import io
    import json

    from lint import cli

    out, err = io.StringIO(), io.StringIO()
    code = cli.main([*args, "--format", "json"], stdout=out, stderr=err)
    return code, json.loads(out.getvalue() or "{}"), err.getvalue()


def _write(tmp_path: Path, name: str, *docs: Any) -> str:
    import json

    path = tmp_path / name
    path.write_text("\n---\n".join(json.dumps(d) for d in docs))
    return str(path)


@pytest.mark.tools
def test_lint_crd_option_selects_the_schema(tmp_path: Path) -> None:
    overlay = _write(tmp_path, "o.yaml", valid())
    karpenter_file = str(Path(tools.karpenter_crds()) / "karpenter.sh_nodeoverlays.yaml")
    code, out, err = _lint("check", overlay, "--crd", karpenter_file)
    assert code == 1, err
    assert [(f["code"], f["field"]) for f in out["findings"]] == [("schema", "spec.dynamicResources")]
    # Options go anywhere; a file with all of Karpenter's CRDs will do; the default is Karpenter's CRD.
    bundle = _write(tmp_path, "crds.yaml", *(YAML(typ="safe", pure=True).load(p.read_text()) for p in
                                              sorted(Path(tools.karpenter_crds()).glob("*.yaml"))))
    assert _lint("check", "--crd", bundle, overlay)[:2] == (code, out)
    assert _lint("check", overlay)[:2] == (code, out)
    # `dra` is the embedded DRA-extended CRD in every command that evaluates; a file named dra is ./dra.
    for command in ("check", "simulate"):
        assert _lint(command, overlay, "--crd", "dra")[0] == 0
    # explain and report tell what the overlay does: nothing under Karpenter's CRD, which refuses it.
    import io

    from lint import cli

    p5 = _write(tmp_path, "p5.yaml", edit(valid(), "spec.requirements", [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["p5.48xlarge"]}]))
    for command, rest in (("explain", ["--instance-type", "p5.48xlarge"]), ("report", ["-o", str(tmp_path / "r")])):
        shown = []
        for crd in ([], ["--crd", "dra"]):
            out, err = io.StringIO(), io.StringIO()
            assert cli.main([command, p5, *crd, *rest], stdout=out, stderr=err) == 0, err.getvalue()
            shown.append(out.getvalue() + ((tmp_path / "r").read_text() if command == "report" else ""))
        assert ["unknown field" in text for text in shown] == [True, False], command
    (tmp_path / "dra").write_text("kind: ConfigMap\n")
    code, _, err = _lint("check", overlay, "--crd", str(tmp_path / "dra"))
    assert code == 2 and "not a CustomResourceDefinition" in err


@pytest.mark.parametrize(("content", "message"), [
    (None, "No such file"), ({"kind": "ConfigMap"}, "not a CustomResourceDefinition"),
    pytest.param("nodepools", "not NodeOverlay.karpenter.sh", marks=pytest.mark.tools), ("{{", "--crd"),
])
def test_lint_crd_that_cannot_serve_exits_2(tmp_path: Path, content: Any, message: str) -> None:
    path = tmp_path / "crd.yaml"
    if content == "nodepools":
        path.write_text((Path(tools.karpenter_crds()) / "karpenter.sh_nodepools.yaml").read_text())
    elif isinstance(content, str):
        path.write_text(content)
    elif content is not None:
        path.write_text(str(content))
    code, _, err = _lint("check", _write(tmp_path, "o.yaml", plain()), "--crd", str(path))
    assert code == 2 and message in err and err.startswith("overlay-lint: error: --crd") and "Traceback" not in err


@pytest.mark.tools
def test_lint_cluster_checks_against_the_cluster_crd(tmp_path: Path, fake_cluster: Any,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    kubeconfig, api = fake_cluster
    crd_path = Path(tools.karpenter_crds()) / "karpenter.sh_nodeoverlays.yaml"
    crd_json = json.loads(json.dumps(YAML(typ="safe", pure=True).load(crd_path.read_text())))
    api.pages = {"/apis/karpenter.sh/v1/nodepools": [{"items": []}],
                 "/apis/karpenter.sh/v1alpha1/nodeoverlays": [{"items": []}],
                 "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/nodeoverlays.karpenter.sh": [crd_json]}
    overlay = _write(tmp_path, "o.yaml", valid())
    cluster = ("--cluster", "--kubeconfig", kubeconfig, "--context", "fake")
    code, out, _ = _lint("check", overlay, *cluster)
    assert code == 1 and [f["field"] for f in out["findings"]] == ["spec.dynamicResources"]
    # --crd wins over the cluster's; a CRD the user may not read leaves Karpenter's, with a note.
    dra_file = str(ROOT / "simulation" / "data" / "nodeoverlays.crd.yaml")
    assert _lint("check", overlay, *cluster, "--crd", dra_file)[0] == 0
    assert _lint("check", overlay, *cluster, "--crd", "dra")[0] == 0
    api.pages["/apis/apiextensions.k8s.io/v1/customresourcedefinitions/nodeoverlays.karpenter.sh"] = [
        json.loads(json.dumps(crds.raw_dra()))]
    assert _lint("check", overlay, *cluster)[0] == 0
    listing = api.do_GET

    def forbidden(handler: Any) -> None:
        if "customresourcedefinitions" in handler.path:
            handler._send(403, {"kind": "Status", "code": 403, "reason": "Forbidden"})
        else:
            listing(handler)

    monkeypatch.setattr(api, "do_GET", forbidden)
    code, out, _ = _lint("check", overlay, *cluster)
    assert code == 1 and any("cannot read the CRD nodeoverlays.karpenter.sh (403" in n and
                             crds.karpenter().origin in n for n in out["notes"])


async def test_webhook_crd_option_selects_the_schema(tmp_path: Path) -> None:
    import asyncio

    import aiohttp

    from tests.webhook_support import ADMISSION, Process, client_context, make_pki, review, server_args

    keys = make_pki(tmp_path / "pki")
    dra = {**valid(), "metadata": {"name": "dra-only"}}
    dra["spec"] = {"weight": 77, "dynamicResources": valid()["spec"]["dynamicResources"],
                   "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                                     "values": ["p5.48xlarge"]}]}
    answers = []
    # The default with --state is Karpenter's CRD.
    for extra in (("--crd", "dra"), ()):
        proc = await Process(server_args(keys, "--state", str(ADMISSION), *extra), tmp_path / "log").start()
        try:
            await proc.wait_for("ready")
            url = f"https://127.0.0.1:{proc.port}/validate"
            async with aiohttp.ClientSession() as session, session.post(
                    url, json=review(dra), ssl=client_context(keys.ca)) as answer:
                answers.append((await answer.json())["response"])
        finally:
            assert proc.stop() == 0
        await asyncio.sleep(0)
    dra_answer, karpenter = answers
    assert dra_answer["allowed"] is True, dra_answer
    assert karpenter["allowed"] is False and 'unknown field "dynamicResources"' in karpenter["status"]["message"]
    broken = tmp_path / "crd.yaml"
    broken.write_text("kind: CustomResourceDefinition\n")
    proc = Process(server_args(keys, "--state", str(ADMISSION), "--crd", str(broken)), tmp_path / "log2")
    assert proc.proc.wait(60) == 2 and "not NodeOverlay.karpenter.sh" in proc.log.read_text()


def test_the_embedded_crds_load_untrusted_too() -> None:
    # crds.karpenter() and crds.dra() skip the metaschema check at start-up: their schemas pass it.
    assert crds.load(crds.raw_dra(), "checked").converted == crds.dra().converted
    assert crds.load(crds.raw_karpenter(), "checked").converted == crds.karpenter().converted


def test_a_schema_the_metaschema_refuses_is_a_crd_error() -> None:
    raw = copy.deepcopy(dict(crds.raw_dra()))
    raw["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["maxProperties"] = "many"
    with pytest.raises(crds.CrdError, match="not a usable openAPIV3Schema"):
        crds.load(raw, "given")
