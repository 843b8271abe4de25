"""Build the krew archive of the `kubectl overlay` launcher, byte for byte reproducible, and print
its sha256 (the value `overlay.yaml` must carry).

    python plugins/krew/archive.py dist/kubectl-overlay.tar.gz
"""

from __future__ import annotations

import gzip
import hashlib
import io
import pathlib
import sys
import tarfile

HERE = pathlib.Path(__file__).resolve().parent
LAUNCHER = "kubectl-overlay"


def archive() -> bytes:
    data = (HERE / LAUNCHER).read_bytes()
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        info = tarfile.TarInfo(LAUNCHER)
        info.size, info.mode, info.mtime = len(data), 0o755, 0
        tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    # mtime 0 and no file name in the gzip header: the same input gives the same bytes.
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        sys.stderr.write("usage: archive.py OUTPUT.tar.gz\n")
        return 2
    data = archive()
    pathlib.Path(argv[0]).write_bytes(data)
    print(hashlib.sha256(data).hexdigest())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
