"""`overlay-lint`: check, simulate and explain NodeOverlays offline (SPEC section 5).

Exit status: 0 nothing at or above --fail-on, 1 findings at or above it (for simulate and
explain: the input had errors), 2 usage or I/O errors. `main` returns it and never exits, so
it can be called from tests and other programs.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import sys
from collections.abc import Sequence
from typing import Any, BinaryIO, NoReturn, TextIO

from lint import cluster, context, formats, reader, sarif, views
from lint.loader import Loaded, Loader
from lint.positions import Table
from simulation import catalog as cat
from simulation import effects, explain, findings
from simulation import evaluate as ev
from simulation.findings import Severity

PROG = "overlay-lint"


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


def _size(text: str) -> int:
    try:
        return reader.parse_size(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 10485760, 10Mi)") from None


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="files, directories (recursive: *.yaml, *.yml, *.json) or - for stdin")
    p.add_argument("--catalog", metavar="FILE",
                   help="instance types: a JSON catalog or YAML InstanceType documents "
                        "(default: embedded AWS us-east-1 data)")
    p.add_argument("--max-file-size", type=_size, default=reader.DEFAULT_MAX_BYTES, metavar="BYTES",
                   help="refuse input files larger than this (default 10Mi)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Lint and simulate Karpenter NodeOverlays offline.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {sarif.version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    check = sub.add_parser("check", help="report conflicts and invalid overlays",
                           description="Report what the webhook would deny or warn about.")
    _common(check)
    check.add_argument("--existing", nargs="+", action="extend", default=[], metavar="PATH",
                       help="objects already in the cluster (files); a candidate with the same name "
                            "replaces its existing version")
    check.add_argument("--cluster", action="store_true", help="read existing NodeOverlays and NodePools live")
    check.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig for --cluster")
    check.add_argument("--context", metavar="NAME", help="kubeconfig context for --cluster")
    check.add_argument("--format", choices=formats.FORMATS, default="text")
    check.add_argument("--fail-on", choices=("error", "warning"), default="error",
                       help="lowest severity that makes the exit status 1 (default error)")

    simulate = sub.add_parser("simulate", help="show what Karpenter does with the overlays",
                              description="Effective prices, capacities and templates per NodePool and "
                                          "instance type.")
    _common(simulate)
    simulate.add_argument("--nodepool", nargs="+", action="extend", default=[], metavar="NAME")
    simulate.add_argument("--instance-type", nargs="+", action="extend", default=[], metavar="NAME")
    simulate.add_argument("--format", choices=("text", "json"), default="text")

    explain = sub.add_parser("explain", help="who sets each field of one instance type, and why",
                             description="For one instance type: every overlay that matched or nearly "
                                         "matched, per field, who won and why.")
    _common(explain)
    explain.add_argument("--instance-type", required=True, metavar="NAME")
    explain.add_argument("--nodepool", metavar="NAME")
    return parser


class _Run:
    """One invocation: the handle table, the loader and the streams."""

    def __init__(self, args: argparse.Namespace, stdin: BinaryIO | None, out: TextIO, err: TextIO) -> None:
        self.args = args
        self.table = Table()
        self.loader = Loader(self.table, args.max_file_size, stdin)
        self.out, self.err = out, err

    def catalog(self, *loads: Loaded) -> cat.Catalog:
        documents = [(obj, self.table[h].file or "the cluster") for loaded in loads
                     for obj, h in loaded.instance_types]
        return context.choose(self.args.catalog, documents)

    def candidates(self) -> tuple[Loaded, ev.Report, cat.Catalog]:
        loaded = self.loader.load(self.args.paths)
        catalog = self.catalog(loaded)
        return loaded, ev.evaluate(loaded.documents, ev.prepare([], catalog)), catalog

    def problems_to_stderr(self, problems: Sequence[findings.Finding]) -> int:
        """simulate/explain: input errors go to stderr so stdout stays the requested output."""
        if not problems:
            return 0
        result = formats.Result(findings.ordered(problems), self.table, 0)
        for f, loc in result.located():
            place, subject = formats.where(f, loc), formats.subject(f, loc)
            self.err.write(f"{place}: {f.severity} {f.code} {subject}: {f.message}\n")
        return 1

    def notes(self, notes: Sequence[str]) -> None:
        for note in notes:
            self.err.write(f"note: {note}\n")


def _check(run: _Run) -> int:
    args = run.args
    if (args.kubeconfig or args.context) and not args.cluster:
        raise UsageError("--kubeconfig and --context only apply with --cluster")
    candidates = run.loader.load(args.paths)
    existing = run.loader.load(args.existing, candidate=False) if args.existing else Loaded()
    notes: list[str] = []
    if args.cluster:
        objects, cluster_notes = cluster.read(args.kubeconfig, args.context)
        existing.extend(run.loader.add_objects(objects))
        notes += cluster_notes
    catalog = run.catalog(candidates, existing)
    report = ev.evaluate(candidates.documents, ev.prepare(existing.documents, catalog))
    found = findings.ordered([*candidates.problems, *existing.problems, *report.findings])
    result = formats.Result(found, run.table, candidates.objects, candidates.ignored, [*notes, *report.notes],
                            candidates.skipped)
    formats.render(args.format, result, run.out, run.err)
    threshold = Severity.parse(args.fail_on)
    return 1 if any(f.severity >= threshold for f in found) else 0


def _known(kind: str, names: Sequence[str], known: Sequence[str]) -> None:
    for name in names:
        if name not in known:
            near = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise reader.InputError(f"unknown {kind} {name!r}{hint}")


def _simulate(run: _Run) -> int:
    loaded, report, catalog = run.candidates()
    _known("NodePool", run.args.nodepool, [p.name for p in report.grid.pools])
    _known("instance type", run.args.instance_type, [t.name for t in catalog.types])
    status = run.problems_to_stderr(loaded.problems)
    run.notes(report.notes)
    cells = effects.effects(report, run.args.nodepool, run.args.instance_type)
    if run.args.format == "json":
        json.dump(views.simulation_json(report.status, cells), run.out, indent=2)
        run.out.write("\n")
    else:
        views.write_simulation(report.status, cells, run.out)
    return status


def _explain(run: _Run) -> int:
    loaded, report, catalog = run.candidates()
    _known("instance type", [run.args.instance_type], [t.name for t in catalog.types])
    if run.args.nodepool is not None:
        _known("NodePool", [run.args.nodepool], [p.name for p in report.grid.pools])
    status = run.problems_to_stderr(loaded.problems)
    run.notes(report.notes)
    try:
        data: dict[str, Any] = explain.explain(report, run.args.instance_type, run.args.nodepool)
    except explain.UnknownName as unknown:
        raise reader.InputError(str(unknown)) from None
    views.write_explanation(data, run.out)
    return status


_COMMANDS = {"check": _check, "simulate": _simulate, "explain": _explain}


def main(argv: Sequence[str] | None = None, *, stdin: BinaryIO | None = None,
         stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    try:
        args = build_parser().parse_args(list(argv) if argv is not None else None)
        return _COMMANDS[args.command](_Run(args, stdin, out, err))
    except _Exit as done:
        return done.status
    except UsageError as usage:
        text = str(usage)
        err.write((text if text.startswith("usage:") else f"{PROG}: error: {text}") + "\n")
        return 2
    except reader.InputError as problem:
        err.write(f"{PROG}: error: {problem}\n")
        return 2
    except KeyboardInterrupt:
        err.write(f"{PROG}: interrupted\n")
        return 130
    except BrokenPipeError:
        return 1


def entrypoint() -> None:
    # A finding quotes user input; a terminal that cannot show a character must not crash the run.
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    status = main()
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`| head`): exit quietly, as other Unix tools do, instead of a
        # second error when the interpreter flushes stdout on the way out.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        status = status or 1
    raise SystemExit(status)
