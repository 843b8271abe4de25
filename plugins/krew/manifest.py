"""Make the krew manifest of a release from overlay.template.yaml: the release's GitHub repository and
tag give the archive's address, the archive archive.py builds gives its sha256. Refuses to run without a
repository and a version, or with a version other than the package's (the archive's launcher pins that
one), so no manifest ever carries a placeholder.

    python plugins/krew/manifest.py --repo OWNER/NAME --version vX.Y.Z [--out-dir dist]

writes OUT_DIR/kubectl-overlay.tar.gz (the release asset) and OUT_DIR/overlay.yaml (for krew-index).
"""

from __future__ import annotations

import argparse
import hashlib
import pathlib
import re
import string
import sys
import tomllib

import archive

HERE = pathlib.Path(__file__).resolve().parent
TEMPLATE = HERE / "overlay.template.yaml"
PYPROJECT = HERE.parent.parent / "pyproject.toml"
ARCHIVE = "kubectl-overlay.tar.gz"
MANIFEST = "overlay.yaml"
# GitHub's rules for an owner and a repository name.
REPO = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,37}[A-Za-z0-9])?/[A-Za-z0-9._-]{1,100}")


class Refused(Exception):
    """An argument a release cannot be made from; the message says which and why."""


def package_version() -> str:
    return str(tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["version"])


def check(repo: str, version: str) -> None:
    if not repo:
        raise Refused("REPO is required: the GitHub repository the release is published in, as owner/name")
    if not REPO.fullmatch(repo):
        raise Refused(f"REPO {repo!r} is not a GitHub owner/name")
    wanted = f"v{package_version()}"
    if not version:
        raise Refused(f"VERSION is required: the release tag ({wanted} for this tree)")
    if version != wanted:
        raise Refused(f"VERSION {version!r} is not this tree's release tag {wanted} "
                      "(the archive's launcher installs that version of the package)")


def render(repo: str, version: str, sha256: str) -> str:
    text = TEMPLATE.read_text(encoding="utf-8")
    # The template's own header explains the placeholders; the manifest says where it came from instead.
    body = text[text.index("\napiVersion:") + 1:]
    header = f"# Made by plugins/krew/manifest.py from overlay.template.yaml for {repo} {version}.\n"
    return header + string.Template(body).substitute(REPO=repo, VERSION=version, SHA256=sha256)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="manifest.py", description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default="", help="GitHub owner/name the release is published in")
    parser.add_argument("--version", default="", help="the release tag, v and the package's version")
    parser.add_argument("--out-dir", type=pathlib.Path, default=pathlib.Path("dist"))
    args = parser.parse_args(argv)
    try:
        check(args.repo, args.version)
    except Refused as err:
        sys.stderr.write(f"krew manifest: {err}\n")
        return 2
    data = archive.archive()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / ARCHIVE).write_bytes(data)
    manifest = render(args.repo, args.version, hashlib.sha256(data).hexdigest())
    (args.out_dir / MANIFEST).write_text(manifest, encoding="utf-8")
    print(f"{args.out_dir / MANIFEST}: upload {args.out_dir / ARCHIVE} to release {args.version} of {args.repo}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
