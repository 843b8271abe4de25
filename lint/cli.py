"""`overlay-lint`: check, simulate and explain NodeOverlays offline or against a cluster (docs/design.md §2.3).

Exit status: 0 nothing at or above --fail-on, 1 findings at or above it (for simulate and
explain: the input had errors), 2 usage or I/O errors, whatever became of the output's reader
(lint/streams.py). `main` returns it and never exits, so it can be called from tests and other programs.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import io
import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, BinaryIO, NoReturn, TextIO

from lint import completion, fleets, formats, junit, streams
from simulation import evaluate as ev
from simulation import findings
from simulation.analysis import hints
from simulation.findings import Severity
from simulation.semantics import catalog as cat
from simulation.semantics import model, region
from simulation.validation import crds
from sources import context, files, fleet
from sources.objects import Loaded, Loader
from sources.positions import Location, Table

if TYPE_CHECKING:
    from lint import fleetsides, sides
    from simulation.analysis import diff
    from sources import git

    _Subparsers = argparse._SubParsersAction["_Parser"]

# A command imports the modules only it uses where it runs (simulate's views, diff's sides, --changed-since's git):
# a pre-commit hook pays a one-file check's start-up on every commit (benchmarks/startup_bench.py).

PROG = "overlay-lint"
# A run allocates about a million long-lived objects (inputs, the prepared cells) and hardly any cycles:
# at the default threshold (700) the collector would rescan the growing heap thousands of times.
RUN_GC_THRESHOLD = 100_000
# An input that could not be read: reported with the rest, but the run exits 2 (an I/O error).
UNREADABLE = "unreadable-input"


class UsageError(Exception):
    pass


class _Exit(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


class _Parser(argparse.ArgumentParser):
    """Reports errors by raising, so `main` returns 2 instead of argparse calling sys.exit."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.format_usage()}{self.prog}: error: {message}")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            sys.stderr.write(message)
        raise _Exit(status)


class _Many(argparse.Action):
    """An option that may be repeated and takes comma lists (`--nodepool a,b --nodepool c`). It
    takes exactly one word each time, so it never swallows the paths that follow it."""

    repeatable = True

    def __init__(self, *args: Any, paths: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.paths = paths

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        value = str(values)
        # A path that exists is taken whole: a comma is legal in a file name.
        items = [value] if self.paths and os.path.exists(value) else [v.strip() for v in value.split(",")]
        if not all(items):
            raise argparse.ArgumentError(self, f"empty name in {value!r}")
        setattr(namespace, self.dest, [*(getattr(namespace, self.dest, None) or []), *items])


class _Version(argparse.Action):
    """--version, the package's version read only when asked: its metadata lookup cost every run 20 ms."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        from lint import sarif  # the version's home, only for --version

        sys.stdout.write(f"{parser.prog} {sarif.version()}\n")
        parser.exit()


def _size(text: str) -> int:
    try:
        return files.parse_size(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 10485760, 10Mi)") from None


def _percent(text: str) -> float:
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a percentage: {text!r} (e.g. 10)") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"not a percentage: {text!r} (e.g. 10)")
    return value


def _common(p: argparse.ArgumentParser, *, writes_file: bool = False) -> None:
    """`writes_file`: the command's output is a file (report), so -o is required."""
    p.add_argument("paths", nargs="*", metavar="PATH",
                   help="files, directories (recursive: *.yaml, *.yml, *.json) or - for stdin")
    p.add_argument("--catalog", metavar="FILE",
                   help="instance types: a JSON catalog or YAML InstanceType documents "
                        "(default: embedded AWS us-east-1 data)")
    p.add_argument("--karpenter-metrics", metavar="URL|FILE|-",
                   help="the cluster's live catalog from Karpenter's metrics at URL (e.g. "
                        "http://localhost:8080/metrics), in a captured FILE or on stdin (-) instead of the embedded "
                        "one; prices are recovered against the overlays in effect: --cluster, --existing, --against "
                        "or diff's base side, never the candidates (docs/live-catalog.md)")
    p.add_argument("--crd", metavar="FILE|dra",
                   help="the NodeOverlay CRD to validate against: a CRD file, or dra for the embedded "
                        "DRA-extended one (spec.dynamicResources) (default: the cluster's with --cluster, else "
                        "Karpenter's own, embedded)")
    p.add_argument("--region", metavar="NAME",
                   help="the cluster's region, e.g. eu-west-1 (default: the cluster's Nodes' with --cluster, else "
                        "the one the inputs' zone and region requirements name, else the catalog's)")
    p.add_argument("--max-file-size", type=_size, default=files.DEFAULT_MAX_BYTES, metavar="BYTES",
                   help="refuse input files larger than this (default 10Mi)")
    p.add_argument("--cluster", action="store_true",
                   help="read the NodeOverlays and NodePools in the cluster (with no PATH: audit them)")
    p.add_argument("--all-nodepools", action="store_true",
                   help="the inputs hold every NodePool of the cluster (implied by --cluster): a requirement key "
                        "that no NodePool defines and no instance type of the catalog's provider can define is "
                        "then an error, as the webhook says")
    p.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig for --cluster (default: $KUBECONFIG, "
                                                        "~/.kube/config, or the pod's service account)")
    p.add_argument("--context", metavar="NAME", help="kubeconfig context for --cluster (default: the current one)")
    _fleet_options(p)
    if writes_file:
        p.add_argument("-o", "--output", metavar="FILE", required=True, help="the HTML file to write")
    else:
        p.add_argument("-o", "--output", metavar="FILE", help="write the output to FILE instead of stdout")


def _fleet_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="FILE",
                   help="the repository's clusters (default: .overlay-lint.yaml at the root of PATH; docs/cli.md "
                        "\"Fleets\")")
    p.add_argument("--only-cluster", action=_Many, default=[], metavar="NAME",
                   help="judge only these of the repository's clusters (repeat or comma-separate; "
                        "`overlay-lint clusters` lists them)")


def _check_parser(sub: _Subparsers) -> None:
    check = sub.add_parser("check", help="report conflicts and invalid overlays",
                           description="Report what the webhook would deny or warn about.")
    _common(check)
    check.add_argument("--existing", action=_Many, paths=True, default=[], metavar="PATH",
                       help="objects already in the cluster (files; repeat or comma-separate); a candidate "
                            "with the same name replaces its existing version")
    check.add_argument("--against", action=_Many, paths=True, default=[], metavar="PATH",
                       help="the rest of the repository: the objects under PATH in files other than the given "
                            "ones, judged against as --existing (a pre-commit hook's staged files against the "
                            "committed ones); their own problems are not reported")
    check.add_argument("--changed-since", metavar="REF",
                       help="a pull request's mode: check the files under the PATHs that changed since git REF "
                            "(from its merge base with HEAD) against the rest of the PATHs (--against)")
    check.add_argument("--format", choices=formats.FORMATS, default="text", help="output format (default text)")
    check.add_argument("--fail-on", choices=("error", "warning"), default="error",
                       help="lowest severity that makes the exit status 1 (default error)")


def _simulate_parser(sub: _Subparsers) -> None:
    simulate = sub.add_parser("simulate", help="show what Karpenter does with the overlays",
                              description="Effective prices, capacities and templates per NodePool and "
                                          "instance type.")
    _common(simulate)
    simulate.add_argument("--nodepool", action=_Many, default=[], metavar="NAME",
                          help="only these NodePools (repeat or comma-separate)")
    simulate.add_argument("--instance-type", action=_Many, default=[], metavar="NAME",
                          help="only these instance types (repeat or comma-separate)")
    simulate.add_argument("--full", action="store_true",
                          help="text: every instance type's figures (default without a filter: a summary per "
                               "overlay and NodePool)")
    simulate.add_argument("--format", choices=("text", "json"), default="text", help="output format (default text)")


def _explain_parser(sub: _Subparsers) -> None:
    explain_ = sub.add_parser("explain", help="who sets each field of one instance type, and why",
                              description="For one instance type: every overlay that matched or nearly "
                                          "matched, per field, who won and why.")
    _common(explain_)
    explain_.add_argument("--instance-type", required=True, metavar="NAME", help="the instance type to explain")
    explain_.add_argument("--nodepool", metavar="NAME", help="only this NodePool")


def _report_parser(sub: _Subparsers) -> None:
    page = sub.add_parser("report", help="write one self-contained HTML page for people",
                          description="Overlays by verdict, conflicts with witnesses, price effect per "
                                      "NodePool and matched cells, as one offline HTML page (-o FILE.html).")
    _common(page, writes_file=True)
    page.add_argument("--diff", action="store_true",
                      help="the page of a change instead: the paths are diff's (BASE..HEAD [PATH...], OLD NEW, "
                           "or --cluster NEW...)")


def _diff_parser(sub: _Subparsers) -> None:
    change = sub.add_parser("diff", help="what a change does to statuses, prices and capacity",
                            description="Compare two sides through the one core: BASE..HEAD [PATH...] (two git "
                                        "revisions, read without a checkout), OLD NEW (files or directories), "
                                        "or --cluster NEW... (what applying NEW changes in the cluster).")
    _common(change)
    change.add_argument("--format", choices=("text", "markdown", "json"), default="text",
                        help="output format (default text; markdown for a pull-request comment)")
    change.add_argument("--fail-on", choices=("error", "warning"), default="error",
                        help="lowest severity of a finding the change introduces that makes the exit status 1 "
                             "(default error)")
    change.add_argument("--fail-on-increase", type=_percent, metavar="PERCENT",
                        help="also exit 1 when an effective price rises by more than PERCENT (e.g. 10)")


def _catalog_parser(sub: _Subparsers) -> None:
    from sources import karpenter  # the metrics reader (and its HTTP client): only the runs that read metrics

    live_ = sub.add_parser("catalog", help="capture the cluster's live catalog from Karpenter's metrics",
                           description="Write the catalog Karpenter publishes (its instance types, zones, capacity "
                                       "types and availability; base prices recovered from its effective ones) "
                                       "as a JSON catalog for --catalog FILE (docs/live-catalog.md).")
    live_.add_argument("paths", nargs="*", metavar="PATH",
                       help="without --cluster: the NodeOverlays and NodePools in effect, whose price overlays "
                            "are undone to recover base prices")
    live_.add_argument("--cluster", action="store_true",
                       help="find Karpenter's metrics Service and read /metrics through the API server; the "
                            "NodeOverlays, NodePools and Nodes are read from the cluster too")
    live_.add_argument("--karpenter-metrics", metavar="URL|FILE|-",
                       help="read Karpenter's metrics at URL, in a captured FILE or on stdin (-) instead")
    live_.add_argument("--crd", metavar="FILE|dra",
                       help="the NodeOverlay CRD the overlays in effect are judged under (default: the cluster's "
                            "with --cluster, else Karpenter's own, embedded)")
    live_.add_argument("--karpenter-service", metavar="NS/NAME[:PORT]",
                       help="Karpenter's metrics Service with --cluster (default: the one labelled "
                            f"{karpenter.SERVICE_SELECTOR}, port {karpenter.METRICS_PORT})")
    live_.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig for --cluster")
    live_.add_argument("--context", metavar="NAME", help="kubeconfig context for --cluster")
    live_.add_argument("--max-file-size", type=_size, default=files.DEFAULT_MAX_BYTES, metavar="BYTES",
                       help="refuse input files larger than this (default 10Mi)")
    live_.add_argument("-o", "--output", metavar="FILE", required=True, help="the JSON catalog to write")


def _clusters_parser(sub: _Subparsers) -> None:
    listing = sub.add_parser("clusters", help="list the clusters a repository holds",
                             description="The clusters discovery finds under PATH (default .): where each is "
                                         "declared, its paths, region, catalog, NodeOverlays and NodePools, and the "
                                         "files no cluster reads; --format json feeds a CI job matrix.")
    listing.add_argument("paths", nargs="*", metavar="PATH", help="the repository's root (default .)")
    listing.add_argument("--format", choices=("text", "json"), default="text", help="output format (default text)")
    listing.add_argument("--max-file-size", type=_size, default=files.DEFAULT_MAX_BYTES, metavar="BYTES",
                         help="refuse input files larger than this (default 10Mi)")
    listing.add_argument("-o", "--output", metavar="FILE", help="write the output to FILE instead of stdout")
    _fleet_options(listing)


def _completion_parser(sub: _Subparsers) -> None:
    shells = sub.add_parser("completion", help="print a shell completion script",
                            description="Print a completion script: source <(overlay-lint completion bash)")
    shells.add_argument("shell", choices=completion.SHELLS)


# Each subcommand's parser, in --help's order.
_PARSERS = {"check": _check_parser, "simulate": _simulate_parser, "explain": _explain_parser, "report": _report_parser,
            "diff": _diff_parser, "catalog": _catalog_parser, "clusters": _clusters_parser,
            "completion": _completion_parser}


def build_parser(prog: str = PROG, command: str | None = None) -> argparse.ArgumentParser:
    """`command`: only that subcommand's parser is built, what a run of it parses with (all of them cost a
    one-file check 5 ms of its start-up); None or no such command: all (--help, completion, docs)."""
    parser = _Parser(prog=prog, description="Lint and simulate Karpenter NodeOverlays offline or in a cluster.")
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, add in _PARSERS.items():
        if command not in _PARSERS or command == name:
            add(sub)
    return parser


def parse(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    """Options may stand before, between or after the paths, as in kubectl. argparse reads the
    positionals of a subcommand in one run, so each subcommand is parsed intermixed."""
    commands = completion.subcommands(parser)
    if not argv or argv[0] not in commands:
        return parser.parse_args(argv)  # --help, --version, or a usage error
    command, words = commands[argv[0]], list(argv[1:])
    # Everything after `--` is a path; the intermixed parser mishandles `--` itself.
    tail = words[words.index("--") + 1:] if "--" in words else []
    args = command.parse_intermixed_args(words[:len(words) - len(tail) - 1] if "--" in words else words)
    if tail:
        if not hasattr(args, "paths"):
            command.error(f"unrecognized arguments: {' '.join(tail)}")
        args.paths += tail
    args.command = argv[0]
    return args


def _rest(candidates: Loaded, existing: Loaded, rest: Loaded) -> Loaded:
    """The rest of a repository joins what the candidates are judged against. An object of a candidate's kind and
    name there is a second copy in the repository, not an earlier version: it joins the candidates, so that the
    core reports the duplicate. Returns the rest as it joined the existing objects (its problems, its notes)."""
    named = {(model.kind_of(d.obj), model.name_of(d.obj)) for d in candidates.documents}
    copies = [d for d in rest.documents if (model.kind_of(d.obj), model.name_of(d.obj)) in named]
    candidates.documents += [dataclasses.replace(d, candidate=True) for d in copies]
    joined = [d for d in rest.documents if d not in copies]
    existing.documents += joined
    existing.instance_types += rest.instance_types
    existing.ignored += rest.ignored
    return dataclasses.replace(rest, documents=joined)


# Findings of the rest of a repository named in the note; the rest are counted.
REST_NAMED = 3


def rest_note(rest: Loaded, baseline: Sequence[findings.Finding]) -> list[str]:
    """The rest of a repository's own problems are not the change's: its input problems and the findings the
    core gives its objects alone (the prepared baseline) are counted and the first few named in a note (a
    whole-tree check reports them). Files it did not lint (a Helm template) are no problem: said apart."""
    sources = {d.source for d in rest.documents}
    found = findings.ordered([*rest.problems, *(f for f in baseline if f.source in sources)])
    out = []
    if found:
        named = ", ".join(f"{f.code} {f.obj}" for f in found[:REST_NAMED])
        more = f" and {len(found) - REST_NAMED} more" if len(found) > REST_NAMED else ""
        out.append(f"{len(found)} problem(s) in the rest of the repository (--against) not reported here "
                   f"({named}{more}): `overlay-lint check` on those files reports them")
    if rest.notes:
        out.append(f"{len(rest.notes)} file(s) in the rest of the repository (--against) not linted: "
                   f"{'; '.join(rest.notes[:REST_NAMED])}{' ...' if len(rest.notes) > REST_NAMED else ''}")
    return out


class _Run:
    """One invocation: the handle table, the loader and the streams."""

    def __init__(self, args: argparse.Namespace, stdin: BinaryIO | None, out: TextIO, err: TextIO,
                 table: Table | None = None, catalogs: dict[str, cat.Catalog] | None = None) -> None:
        self.args = args
        self.table = table if table is not None else Table()
        self.loader = Loader(self.table, args.max_file_size, stdin, getattr(args, "flux_paths", None))
        self.out, self.err = out, err
        self.stdin = stdin
        # Catalogs read so far (by --catalog, "" the embedded one): a fleet's clusters read each once.
        self.catalogs = catalogs if catalogs is not None else {}
        # The rest of a repository (--against, --changed-since), as it joined the existing objects.
        self.rest: Loaded | None = None

    def fork(self, args: argparse.Namespace) -> _Run:
        """A run of one cluster of a fleet: its own reader, the same handles (one report) and catalogs."""
        return _Run(args, self.stdin, self.out, self.err, self.table, self.catalogs)

    def catalog(self, *loads: Loaded, in_effect: Sequence[ev.Document] | None = None,
                crd: crds.Crd | None = None) -> cat.Catalog:
        """The run's catalog; a live one (--karpenter-metrics) has its prices recovered against `in_effect`, the
        overlays in the cluster (None: unknown), judged under `crd`."""
        documents = [(obj, self.table[h].file or "the cluster") for loaded in loads
                     for obj, h in loaded.instance_types]
        metrics = getattr(self.args, "karpenter_metrics", None)
        if metrics is None:
            given = self.args.catalog
            if documents:
                return context.choose(given, documents)
            key = given or ""
            if key not in self.catalogs:
                self.catalogs[key] = context.choose(given, documents)
            return self.catalogs[key]
        if self.args.catalog is not None or documents:
            raise UsageError("--karpenter-metrics is a catalog: give it or --catalog (or InstanceType documents), "
                             "not both")
        if metrics == files.STDIN and files.STDIN in self.args.paths:
            raise UsageError("standard input (-) can be --karpenter-metrics or a PATH, not both")
        from sources import karpenter

        live = karpenter.read_live(karpenter.where_of(metrics), cat.default(), in_effect, at=_now(), crd=crd,
                                   stdin=self.stdin)
        self.notes(live.notes)
        return live.catalog

    def in_effect(self, candidates: Loaded, existing: Loaded) -> list[ev.Document] | None:
        """The overlays in the cluster, which Karpenter's published prices carry: the cluster's (audited, or judged
        against), --existing and --against (--changed-since) ones; never the candidates under review. None where
        the run names none of these."""
        args = self.args
        changed = getattr(args, "changed_since", None)
        if args.cluster and not args.paths and changed is None:
            return candidates.documents  # the audit: the candidates are the cluster's own objects
        if args.cluster or getattr(args, "existing", None) or getattr(args, "against", None) or changed is not None:
            return existing.documents
        return None

    def one_cluster(self) -> _Run:
        """simulate, explain and report show one cluster: in a fleet, the one --only-cluster names."""
        if not fleets.applies(self.args):
            return self
        found = fleets.discover(self.args, self.args.paths)
        chosen = fleets.chosen(found, self.args.only_cluster)
        if not found.split:
            return self
        if len(chosen) != 1:
            raise UsageError(f"the repository holds {len(chosen)} clusters ({', '.join(c.name for c in chosen)}): "
                             "choose one with --only-cluster NAME")
        cluster = chosen[0]
        self.notes([f"cluster {cluster.name} ({cluster.origin})"])
        return self.fork(fleets.for_cluster(self.args, cluster, paths=list(cluster.paths)))

    def inputs(self) -> tuple[Loaded, Loaded, list[str]]:
        """The candidates (the paths) and what they are checked against (`--existing` files, the
        cluster). With `--cluster` and no paths, the cluster's own objects are the candidates."""
        args = self.args
        if (args.kubeconfig or args.context) and not args.cluster:
            raise UsageError("--kubeconfig and --context only apply with --cluster")
        if not args.paths and not args.cluster:
            raise UsageError("give at least one PATH (or - for stdin), or --cluster")
        paths, against = args.paths, getattr(args, "against", [])
        notes: list[str] = []
        if getattr(args, "changed_since", None) is not None:
            from lint import changes

            if files.STDIN in paths:
                raise UsageError("--changed-since takes directories and files, not - (stdin)")
            try:
                paths, against = changes.changed_files(args.changed_since, paths), [*against, *paths]
            except changes.ChangesError as err:
                raise files.InputError(str(err)) from None
            notes.append(f"{len(paths)} file(s) changed since {args.changed_since}, checked against the rest")
        candidates = self.loader.load(paths) if paths else Loaded()
        existing_paths = getattr(args, "existing", [])
        existing = self.loader.load(existing_paths, candidate=False) if existing_paths else Loaded()
        if against:
            self.rest = _rest(candidates, existing, self.loader.load(against, candidate=False, rest=True))
        if args.cluster:
            from sources import kube  # the API client: only the runs that read a cluster

            objects, unread = kube.read(args.kubeconfig, args.context)
            notes += unread
            audit = not args.paths and getattr(args, "changed_since", None) is None
            (candidates if audit else existing).extend(self.loader.add_objects(objects, candidate=audit))
        return candidates, existing, notes

    def placed(self, catalog: cat.Catalog, documents: Sequence[ev.Document], notes: list[str]) -> cat.Catalog:
        """The catalog laid out in the run's region (semantics/region.py)."""
        places = None
        if self.args.cluster and self.args.region is None:
            from sources import kube

            places, unread = kube.read_places(self.args.kubeconfig, self.args.context)
            notes += unread
        try:
            chosen = region.choose(catalog, [d.obj for d in documents], self.args.region, places)
        except region.RegionError as err:
            raise UsageError(str(err)) from None
        notes += chosen.notes
        return chosen.catalog

    def crd(self, notes: list[str]) -> crds.Crd:
        raw = None
        if self.args.cluster and self.args.crd is None:
            from sources import kube

            raw, unread = kube.read_crd(self.args.kubeconfig, self.args.context)
            notes += unread
        crd = context.choose_crd(self.args.crd, raw)
        notes += context.crd_notes(crd)
        return crd

    def evaluate(self, findings_only: bool = False) -> tuple[Loaded, ev.Report, cat.Catalog, list[str]]:
        """The run's judgement; `findings_only`: of the report, only its findings are read (`check`), so the
        existing objects the candidates cannot reach need not be judged."""
        candidates, existing, notes = self.inputs()
        crd = self.crd(notes)
        catalog = self.placed(self.catalog(candidates, existing, in_effect=self.in_effect(candidates, existing),
                                           crd=crd),
                              [*candidates.documents, *existing.documents], notes)
        # The rest of a repository's own findings are counted in a note: all of it is judged.
        reach = findings_only and self.rest is None
        report, prepared = self.judge(candidates, existing, catalog, crd, reach=reach)
        candidates.problems += existing.problems
        if self.rest is not None:
            notes += rest_note(self.rest, prepared.baseline)
        return candidates, report, catalog, [*candidates.notes, *existing.notes, *notes, *report.notes]

    def judge(self, candidates: Loaded, existing: Loaded, catalog: cat.Catalog, crd: crds.Crd,
              checked: Mapping[str, ev.Checked] | None = None, reach: bool = False) -> tuple[ev.Report, ev.Prepared]:
        """The one core on these objects, and the snapshot of the existing objects it judged against (their own
        findings are made only if asked for); `checked`: earlier checks to reuse for identical overlays; `reach`:
        only the existing objects the candidates reach are judged (the report's findings are all that is read)."""
        prepared = ev.prepare(existing.documents, catalog, crd=crd,
                              every_nodepool=self.args.cluster or self.args.all_nodepools,
                              candidates=candidates.documents if reach else None)
        # The inputs and the prepared existing objects live to the end of the run: no collection need
        # scan them again (`main` unfreezes them).
        gc.freeze()
        return ev.evaluate(candidates.documents, prepared, checked=checked), prepared

    def subjects(self, loaded: Loaded) -> list[junit.Subject]:
        out = []
        for obj, handle in [*((d.obj, d.source) for d in loaded.documents), *loaded.instance_types]:
            origin = self.table[handle]
            position = origin.locate(())
            location = Location(origin.file, *(position if position is not None else (None, None)))
            out.append(junit.Subject(findings.ObjectRef(model.kind_of(obj) or "", model.name_of(obj) or ""),
                                     location))
        return out

    def problems_to_stderr(self, problems: Sequence[findings.Finding]) -> int:
        """simulate/explain: input errors go to stderr so stdout stays the requested output."""
        if not problems:
            return 0
        result = formats.Output(findings.ordered(problems), self.table, 0)
        for f, loc in result.located():
            place, subject = formats.where(f, loc), formats.subject(f, loc)
            self.err.write(f"{place}: {f.severity} {f.code} {subject}: {f.message}\n")
        return 2 if any(f.code == UNREADABLE for f in problems) else 1

    def notes(self, notes: Sequence[str]) -> None:
        for note in notes:
            self.err.write(f"note: {note}\n")


def _first_copies(found: Sequence[findings.Finding], table: Table) -> list[findings.Finding]:
    """A duplicate's `detail.first` (the core's handle of the first copy) as that copy's file:line."""
    out = []
    for f in found:
        detail = dict(f.detail)
        if f.code == "duplicate-object" and detail.get("first", "").isdigit():
            origin = table[int(detail["first"])]
            position = origin.locate(()) if origin.file is not None else None
            where = f"{origin.file}:{position[0]}" if position is not None else (origin.file or "the cluster")
            f = dataclasses.replace(f, detail=tuple(sorted({**detail, "first": where}.items())),
                                    message=f"{f.message}; the first copy is at {where}")
        out.append(f)
    return out


def _checked(run: _Run, cluster: str | None = None, extra: Sequence[findings.Finding] = (),
             notes: Sequence[str] = ()) -> formats.Output:
    """One judgement of `check`: the run's, or one cluster's of a fleet (with its discovery errors)."""
    candidates, report, _, said = run.evaluate(findings_only=True)
    found = findings.ordered(hints.attach(_first_copies([*extra, *candidates.problems, *report.findings],
                                                        run.table)))
    # Only JUnit lists every object (a testcase each): each object's position costs a scan of its file.
    subjects = run.subjects(candidates) if run.args.format == "junit" else ()
    return formats.Output(found, run.table, candidates.objects, candidates.ignored, [*notes, *said],
                          candidates.skipped, subjects, Severity.parse(run.args.fail_on), cluster)


def _fleet(run: _Run) -> fleets.Fleet | None:
    """The clusters `check` judges apart, or None when the run is one judgement as before."""
    args = run.args
    if not fleets.applies(args):
        return None
    changed: list[str] | None = None
    roots = args.paths
    if getattr(args, "changed_since", None) is not None:
        changed = _changed(args.changed_since, args.paths)
    elif getattr(args, "against", []):
        roots, changed = args.against, args.paths
    found = fleets.discover(args, roots)
    if not found.split:
        if args.only_cluster:
            fleets.chosen(found, args.only_cluster)  # the one cluster's name, or a usage error naming it
        return None
    if changed is None:
        return fleets.whole(args, found)
    planned = fleets.changed(args, found, changed, roots)
    if args.changed_since is None:
        return planned
    said = f"{len(changed)} file(s) changed since {args.changed_since}, checked against the rest of their clusters"
    return dataclasses.replace(planned, plans=tuple(dataclasses.replace(p, notes=(said, *p.notes))
                                                    for p in planned.plans))


def _judged_apart(run: _Run, planned: fleets.Fleet) -> list[formats.Output]:
    """Each cluster judged alone; in a process pool where there are several and the cores to run them (each worker
    holds one cluster at a time, and hands back only its located findings)."""
    jobs = [(plan, [p for p in planned.problems if p.cluster == plan.cluster]) for plan in planned.plans]
    # Read before any worker starts, so that forked workers share it: the catalog is read once a run.
    run.catalog(Loaded())
    fleets.render_ahead(planned.plans)
    workers = min(len(jobs), os.cpu_count() or 1)
    if workers > 1:
        import concurrent.futures
        import multiprocessing

        # Forked, each worker has the run (its catalogs, streams) as the parent left it; only jobs and results
        # cross the pipe.
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"),
                                                    initializer=_WORKER.append, initargs=(run,)) as pool:
            parts = list(pool.map(_in_worker, jobs))
    else:
        parts = [_one_judgement(run, plan, problems) for plan, problems in jobs]
    results = [_adopted(part, run.table) for part in parts]
    # Errors of clusters not judged at all (no path left, a second of one name): a report of their own.
    judged = {p.cluster for p in planned.plans}
    orphans = [fleets.finding(p, run.table) for p in planned.problems if p.cluster not in judged]
    if orphans or not results:
        results.append(formats.Output(findings.ordered(orphans), run.table, 0,
                                      threshold=Severity.parse(run.args.fail_on), cluster="discovery"))
    return results


# In a worker process: the run that forked it.
_WORKER: list[_Run] = []


def _in_worker(job: tuple[fleets.Plan, Sequence[fleet.Problem]]) -> formats.Output:
    return _one_judgement(_WORKER[0], *job)


def _one_judgement(parent: _Run, plan: fleets.Plan, problems: Sequence[fleet.Problem]) -> formats.Output:
    """One cluster's judgement, with a table of only the documents its findings name (what a worker sends back)."""
    run = _Run(plan.args, None, parent.out, parent.err, catalogs=parent.catalogs)
    result = _checked(run, plan.cluster, [fleets.finding(p, run.table) for p in problems], plan.notes)
    table, moved = Table(), {}
    kept = []
    for f in result.findings:
        if f.source is not None:
            if f.source not in moved:
                moved[f.source] = table.add(run.table[f.source])
            f = dataclasses.replace(f, source=moved[f.source])
        kept.append(f)
    return dataclasses.replace(result, findings=kept, table=table)


def _adopted(result: formats.Output, table: Table) -> formats.Output:
    """A cluster's judgement with its documents moved into the run's table (one report, one table)."""
    offset = len(table)
    for handle in range(len(result.table)):
        table.add(result.table[handle])
    kept = [dataclasses.replace(f, source=f.source + offset) if f.source is not None else f
            for f in result.findings]
    return dataclasses.replace(result, findings=kept, table=table)


def _changed(ref: str, paths: Sequence[str]) -> list[str]:
    from lint import changes

    if files.STDIN in paths:
        raise UsageError("--changed-since takes directories and files, not - (stdin)")
    try:
        return changes.changed_files(ref, paths)
    except changes.ChangesError as err:
        raise files.InputError(str(err)) from None


def _check(run: _Run) -> int:
    args = run.args
    planned = _fleet(run)
    results = [_checked(run)] if planned is None else _judged_apart(run, planned)
    formats.render_all(args.format, results, run.out, run.err)
    found = [f for r in results for f in r.findings]
    if any(f.code == UNREADABLE for f in found):
        return 2
    threshold = Severity.parse(args.fail_on)
    return 1 if any(f.severity >= threshold for f in found) else 0


def _known(kind: str, names: Sequence[str], known: Sequence[str]) -> None:
    import difflib

    for name in names:
        if name not in known:
            near = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise files.InputError(f"unknown {kind} {name!r}{hint}")


def _simulate(run: _Run) -> int:
    from lint import views
    from simulation.analysis import effects

    run = run.one_cluster()
    loaded, report, catalog, notes = run.evaluate()
    _known("NodePool", run.args.nodepool, [p.name for p in report.grid.pools])
    _known("instance type", run.args.instance_type, [t.name for t in catalog.types])
    status = run.problems_to_stderr(loaded.problems)
    run.notes(notes)
    cells = effects.effects(report, run.args.nodepool, run.args.instance_type)
    if run.args.format == "json":
        run.out.write(json.dumps(views.simulation_json(report.status, cells), indent=2))
        run.out.write("\n")
    elif run.args.full or run.args.nodepool or run.args.instance_type:
        views.write_simulation(report.status, cells, run.out, named=bool(run.args.instance_type))
    else:
        views.write_summary(report.status, cells, run.out)
    return status


def _explain(run: _Run) -> int:
    from lint import views
    from simulation.analysis import explain

    run = run.one_cluster()
    loaded, report, catalog, notes = run.evaluate()
    _known("instance type", [run.args.instance_type], [t.name for t in catalog.types])
    if run.args.nodepool is not None:
        _known("NodePool", [run.args.nodepool], [p.name for p in report.grid.pools])
    status = run.problems_to_stderr(loaded.problems)
    run.notes(notes)
    try:
        data: dict[str, Any] = explain.explain(report, run.args.instance_type, run.args.nodepool)
    except explain.UnknownName as unknown:
        raise files.InputError(str(unknown)) from None
    views.write_explanation(data, run.out)
    return status


def _report(run: _Run) -> int:
    from simulation.analysis import effects

    if run.args.diff:
        from lint import diffpage, diffview

        change, two, notes = _compared(run)
        run.out.write(diffpage.render(diffview.Page(change, run.table, two.base_label, two.head_label, notes)))
        return _diff_status(run, change, two)
    run = run.one_cluster()
    loaded, report, _, notes = run.evaluate()
    status = run.problems_to_stderr(loaded.problems)
    found = findings.ordered(hints.attach([*loaded.problems, *report.findings]))
    result = formats.Output(found, run.table, loaded.objects, loaded.ignored, notes, loaded.skipped)
    from lint import report as html_report  # the page's code, only for the command that writes it

    run.out.write(html_report.render(result, report, effects.effects(report)))
    return status


def _compared(run: _Run) -> tuple[diff.Diff, sides.Sides, list[str]]:
    """Both sides of a change through the one core, compared (docs/design.md §3.5)."""
    from lint import sides

    args = run.args
    if (args.kubeconfig or args.context) and not args.cluster:
        raise UsageError("--kubeconfig and --context only apply with --cluster")
    try:
        two = sides.load(run.loader, args.paths, args.cluster, args.kubeconfig, args.context)
    except sides.UsageError as usage:
        raise UsageError(str(usage)) from None
    result, notes = _compare(run, two)
    return result, two, notes


def _compare(run: _Run, two: sides.Sides) -> tuple[diff.Diff, list[str]]:
    from simulation.analysis import diff

    notes = list(two.notes)
    crd = run.crd(notes)
    reports: list[ev.Report] = []
    placed: list[tuple[list[Mapping[str, Any]], cat.Catalog]] = []
    for side in (two.base, two.head):
        types = [obj for obj, _ in side.instance_types]
        # The same InstanceType documents (or none) on both sides: one catalog, read and laid out once.
        catalog = next((c for t, c in placed if t == types), None)
        if catalog is None:
            # The base side is what is in effect: Karpenter's published prices carry its overlays.
            catalog = run.placed(run.catalog(side, in_effect=two.base.documents, crd=crd), side.documents, notes)
            placed.append((types, catalog))
        checked = reports[0].overlays if reports else None
        report, _ = run.judge(side, Loaded(), catalog, crd, checked)
        found = findings.ordered(hints.attach([*side.problems, *report.findings]))
        reports.append(dataclasses.replace(report, findings=tuple(found)))
        notes += [n for n in report.notes if n not in notes]
    return diff.compare(*reports), notes


def _diff(run: _Run) -> int:
    from lint import diffview

    args = run.args
    span = _fleet_span(args)
    if span is not None:
        from lint import fleetsides

        with fleetsides.revisions(span, args.paths[1:] or ["."], getattr(args, "config", None)) as revisions:
            if revisions.split:
                return _fleet_diff(run, revisions)
            if args.only_cluster:
                fleets.chosen(revisions.found[1], args.only_cluster)  # the one cluster's name, or a usage error
    result, two, notes = _compared(run)
    page = diffview.Page(result, run.table, two.base_label, two.head_label, notes)
    if args.format == "json":
        run.out.write(json.dumps(diffview.to_json(page), indent=2) + "\n")
    elif args.format == "markdown":
        run.out.write(diffview.markdown(page))
    else:
        run.notes(notes)
        diffview.write_text(page, run.out)
    return _diff_status(run, result, two)


def _fleet_span(args: argparse.Namespace) -> git.Range | None:
    """The revisions of `diff BASE..HEAD` where discovery may find several clusters: one directory (the
    repository's root) or a config, as for `check`; files named, or several paths, are one cluster."""
    if args.cluster or not args.paths or os.path.exists(args.paths[0]) or "-" in args.paths:
        return None
    roots = args.paths[1:] or ["."]
    if getattr(args, "config", None) is None and not (len(roots) == 1 and os.path.isdir(roots[0])):
        return None
    from sources import git

    return git.parse_range(args.paths[0])


def _fleet_diff(run: _Run, revisions: fleetsides.Revisions) -> int:
    """Each cluster's two sides compared alone; only the clusters the change touches are shown (docs/diff.md)."""
    from lint import diffview, fleetsides, sides

    shown: list[diffview.ClusterPage] = []
    unchanged: list[str] = []
    status = 0
    for pair in revisions.pairs(run.args.only_cluster):
        cluster = pair.head or pair.base
        assert cluster is not None
        judged = run.fork(fleetsides.side_args(run.args, cluster))
        base = Loaded() if pair.base is None else \
            run.fork(fleetsides.side_args(run.args, pair.base)).loader.load(list(pair.base.paths))
        head = Loaded() if pair.head is None else judged.loader.load(list(pair.head.paths))
        two = sides.Sides(base, head, revisions.base.label, revisions.head.label, [])
        result, notes = _compare(judged, two)
        if pair.change == fleetsides.CHANGED and result.empty:
            unchanged.append(pair.name)
            continue
        shown.append(diffview.ClusterPage(pair.name, pair.change, diffview.Page(
            result, run.table, two.base_label, two.head_label, [revisions.said(n) for n in notes])))
        status = max(status, _diff_status(judged, result, two))
    table = fleetsides.relabelled(run.table, revisions)
    fleet_page = diffview.FleetPage([dataclasses.replace(c, page=dataclasses.replace(c.page, table=table))
                                     for c in shown], unchanged, revisions.base.label, revisions.head.label,
                                    revisions.problems())
    if run.args.format == "json":
        run.out.write(json.dumps(diffview.fleet_json(fleet_page), indent=2) + "\n")
    elif run.args.format == "markdown":
        run.out.write(diffview.fleet_markdown(fleet_page))
    else:
        run.notes([*fleet_page.notes, *(f"[{c.cluster}] {n}" for c in shown for n in c.page.notes)])
        diffview.write_fleet_text(fleet_page, run.out)
    return status


def _diff_status(run: _Run, result: diff.Diff, two: sides.Sides) -> int:
    """2 for an unreadable input, 1 for findings the change introduces at or above --fail-on (`report --diff`:
    errors) or a price rise past --fail-on-increase, else 0."""
    if any(f.code == UNREADABLE for f in two.head.problems):
        return 2
    threshold = Severity.parse(getattr(run.args, "fail_on", "error"))
    increase = getattr(run.args, "fail_on_increase", None)
    dearer = increase is not None and result.increases(increase)
    return 1 if dearer or any(f.severity >= threshold for f in result.introduced) else 0


def _now() -> str:
    import datetime

    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _catalog(run: _Run) -> int:
    """`catalog`: the live catalog, captured as JSON."""
    from sources import karpenter, kube

    args = run.args
    if args.cluster == (args.karpenter_metrics is not None):
        raise UsageError("give one of --cluster and --karpenter-metrics URL|FILE|-")
    if args.karpenter_metrics == files.STDIN and files.STDIN in args.paths:
        raise UsageError("standard input (-) can be --karpenter-metrics or a PATH, not both")
    if (args.kubeconfig or args.context or args.karpenter_service) and not args.cluster:
        raise UsageError("--kubeconfig, --context and --karpenter-service only apply with --cluster")
    if args.cluster and args.paths:
        raise UsageError("with --cluster the overlays in effect are the cluster's: give no PATH")
    documents: list[ev.Document] | None = None
    if args.paths:
        loaded = run.loader.load(args.paths)
        if loaded.problems:
            run.problems_to_stderr(loaded.problems)
            raise files.InputError("the PATHs could not be read whole: no catalog written")
        documents = loaded.documents
    client = kube.Client.connect(args.kubeconfig, args.context) if args.cluster else None
    try:
        raw = None
        if client is not None:
            objects, unread = kube.read_all(client)
            run.notes(unread)
            documents = run.loader.add_objects(objects).documents
            where = karpenter.locate(client, args.karpenter_service)
            if args.crd is None:
                raw, unread = kube.read_crd(args.kubeconfig, args.context)
                run.notes(unread)
        else:
            where = karpenter.where_of(args.karpenter_metrics)
        live = karpenter.read_live(where, cat.default(), documents, client, at=_now(),
                                   crd=context.choose_crd(args.crd, raw), stdin=run.stdin)
        catalog, notes = live.catalog, live.notes
    finally:
        if client is not None:
            client.close()
    run.notes(notes)
    run.out.write(json.dumps(cat.to_json(catalog), indent=1) + "\n")
    return 0


def _clusters(run: _Run) -> int:
    """`clusters`: what discovery finds, and why."""
    found = fleets.discover(run.args, run.args.paths or ["."])
    data = fleets.describe(found, run.args.only_cluster, run.loader)
    fleets.write(data, run.args.format, run.out)
    return 1 if data["errors"] else 0


_COMMANDS = {"check": _check, "clusters": _clusters, "simulate": _simulate, "explain": _explain,
             "report": _report, "diff": _diff, "catalog": _catalog}


def write_output(path: str, text: str) -> None:
    """Replace `path` whole: a CI step never reads a half-written report."""
    import tempfile

    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, temporary = tempfile.mkstemp(dir=directory, prefix=".overlay-lint-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.chmod(temporary, 0o644)
            os.replace(temporary, path)
        except BaseException:
            os.unlink(temporary)
            raise
    except OSError as err:
        raise files.InputError(f"--output {path}: {err.strerror or err}") from None


def _dispatch(args: argparse.Namespace, parser: argparse.ArgumentParser, stdin: BinaryIO | None,
              out: TextIO, err: TextIO) -> int:
    if args.command == "completion":
        out.write(completion.script(args.shell, parser))
        return 0
    if args.output is None:
        return _COMMANDS[args.command](_Run(args, stdin, out, err))
    buffer = io.StringIO()
    status = _COMMANDS[args.command](_Run(args, stdin, buffer, err))
    write_output(args.output, buffer.getvalue())
    return status


def main(argv: Sequence[str] | None = None, *, stdin: BinaryIO | None = None,
         stdout: TextIO | None = None, stderr: TextIO | None = None, prog: str = PROG) -> int:
    out = streams.guard(stdout if stdout is not None else sys.stdout)
    err = streams.guard(stderr if stderr is not None else sys.stderr)
    collecting = gc.get_threshold()
    gc.set_threshold(RUN_GC_THRESHOLD, *collecting[1:])
    try:
        words = list(argv) if argv is not None else sys.argv[1:]
        # The completion script describes every command; any other run parses with its command's parser alone.
        parser = build_parser(prog, words[0] if words and words[0] != "completion" else None)
        args = parse(parser, words)
        return _dispatch(args, parser, stdin, out, err)
    except _Exit as done:
        return done.status
    except (UsageError, fleets.UsageError) as usage:
        text = str(usage)
        err.write((text if text.startswith("usage:") else f"{prog}: error: {text}") + "\n")
        return 2
    except files.InputError as problem:
        err.write(f"{prog}: error: {problem}\n")
        return 2
    except KeyboardInterrupt:
        err.write(f"{prog}: interrupted\n")
        return 130
    except BrokenPipeError:
        # Only argparse's --help and --version write past the guarded streams, and both end with 0.
        return 0
    except Exception as bug:  # exit 1 means findings: a crash must never look like one
        err.write(f"{prog}: internal error: {type(bug).__name__}: {_one_line(bug)}\n")
        return 2
    finally:
        gc.unfreeze()
        gc.set_threshold(*collecting)


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return text[:300] + "..." if len(text) > 300 else text


def prepare_streams() -> None:
    # A finding quotes user input; a terminal that cannot show a character must not crash the run.
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")


def finish(status: int) -> NoReturn:
    """Exit with `status`, whatever became of stdout's reader (lint/streams.py)."""
    streams.Guarded(sys.stdout).flush()
    # The interpreter collects once more on its way out, scanning every object of the run (the catalog, the grid,
    # the modules) to free nothing that exit would not: 10 ms of a one-file check. Frozen, they are not scanned.
    gc.freeze()
    raise SystemExit(status)


def entrypoint() -> None:
    prepare_streams()
    finish(main())
