"""`kubectl overlay …`: the linter as a kubectl plugin (the `kubectl-overlay` executable).

kubectl runs `kubectl-overlay` with the words after `overlay`. The commands are overlay-lint's,
with `--cluster` implied: the current kubeconfig context unless `--context`/`--kubeconfig` say
otherwise (kubectl's own flags, and `KUBECONFIG` as kubectl reads it).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import BinaryIO, TextIO

from lint import cli, completion

PROG = "kubectl overlay"
# Commands that read objects; `completion` is overlay-lint's own business.
EXCLUDED = frozenset({"completion"})


def commands() -> list[str]:
    return [name for name in completion.subcommands(cli.build_parser(PROG)) if name not in EXCLUDED]


def usage() -> str:
    names = commands()
    return (f"usage: {PROG} {{{','.join(names)}}} [PATH ...] [--context NAME] [--kubeconfig FILE] [options]\n\n"
            "overlay-lint against the cluster of the current kubeconfig context: with no PATH, the cluster's\n"
            "NodeOverlays and NodePools are audited; with PATHs, they are checked as changes to it.\n"
            f"Run `{PROG} COMMAND --help` for a command's options.\n")


def main(argv: Sequence[str] | None = None, *, stdin: BinaryIO | None = None,
         stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    args = list(argv) if argv is not None else sys.argv[1:]
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    if not args or args[0] in ("-h", "--help"):
        (out if args else err).write(usage())
        return 0 if args else 2
    if args[0] not in commands():
        err.write(usage() + f"{PROG}: error: unknown command {args[0]!r}\n")
        return 2
    if "--cluster" not in args:
        args.insert(1, "--cluster")  # before any `--`, after which it would be a path
    return cli.main(args, stdin=stdin, stdout=out, stderr=err, prog=PROG)


def entrypoint() -> None:
    cli.prepare_streams()
    cli.finish(main())


if __name__ == "__main__":
    entrypoint()
