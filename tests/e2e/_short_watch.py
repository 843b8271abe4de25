"""`overlay-webhook` whose watches end after a few seconds (test hook for the 410 Gone scenario).

Run as a script: `python tests/e2e/_short_watch.py --watch-seconds N <overlay-webhook flags>`.
A watch that ends normally is resumed from the last resource version; with the production
timeout of minutes a test would wait that long for the resume that meets a compacted revision.
"""

from __future__ import annotations

import sys

from webhook import cli, informer


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "--watch-seconds":
        informer.WATCH_SECONDS = int(argv[1])
        argv = argv[2:]
    return cli.main(argv)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
