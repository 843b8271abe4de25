"""Post `overlay-lint diff --format markdown` as one pull-request comment (GitHub) or merge-request note
(GitLab), updated in place as the branch moves: the comment is found again by the hidden marker on its first
line. Standard library only, so the CI integrations need nothing more than the package.

    python -m lint.prcomment github BODY.md   # GITHUB_TOKEN, GITHUB_REPOSITORY, GITHUB_API_URL, PR_NUMBER
    python -m lint.prcomment gitlab BODY.md   # OVERLAY_LINT_GITLAB_TOKEN, CI_API_V4_URL, CI_PROJECT_ID,
                                              # CI_MERGE_REQUEST_IID

A body that says nothing changed creates no comment, but does update an earlier one (it is no longer true).
A token that may not comment (none, 401, 403, or 404 as GitHub answers for a private repository) skips the
step with a warning: the review goes on without a comment. Exit status: 0 posted, updated or skipped; 2 the
body is not a diff comment, or the API failed otherwise.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from lint import diffview

TIMEOUT = 30.0
PER_PAGE = 100
# Pages of comments read looking for ours: a pull request with more than 10,000 comments gets a new one.
MAX_PAGES = 100
_CHANGES = re.compile(re.escape(diffview.MARKER) + r" changes=(\d+) -->")
_DENIED = frozenset({401, 403, 404})


class Skipped(Exception):
    """The token may not comment here: say so and go on."""


class Failed(Exception):
    pass


@dataclasses.dataclass(frozen=True)
class Forge:
    """Where the comments of one pull or merge request live, and how to write them."""

    comments: str  # URL listing (GET) and creating (POST) them
    headers: Mapping[str, str]
    # The URL of one comment, and the method that edits it.
    one: str
    edit: str

    def url_of(self, comment_id: int) -> str:
        return self.one.format(id=comment_id)


def github(env: Mapping[str, str]) -> Forge:
    token = env.get("GITHUB_TOKEN", "")
    if not token:
        raise Skipped("no GITHUB_TOKEN")
    api = env.get("GITHUB_API_URL", "https://api.github.com").rstrip("/")
    repo, number = _need(env, "GITHUB_REPOSITORY"), _need(env, "PR_NUMBER")
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/vnd.github+json",
               "X-GitHub-Api-Version": "2022-11-28"}
    return Forge(f"{api}/repos/{repo}/issues/{number}/comments", headers,
                 f"{api}/repos/{repo}/issues/comments/{{id}}", "PATCH")


def gitlab(env: Mapping[str, str]) -> Forge:
    token = env.get("OVERLAY_LINT_GITLAB_TOKEN", "")
    if not token:
        raise Skipped("no OVERLAY_LINT_GITLAB_TOKEN (a project or personal access token with the api scope; "
                      "CI_JOB_TOKEN cannot write notes)")
    api = _need(env, "CI_API_V4_URL").rstrip("/")
    project = urllib.parse.quote(_need(env, "CI_PROJECT_ID"), safe="")
    notes = f"{api}/projects/{project}/merge_requests/{_need(env, 'CI_MERGE_REQUEST_IID')}/notes"
    return Forge(notes, {"PRIVATE-TOKEN": token}, f"{notes}/{{id}}", "PUT")


FORGES = {"github": github, "gitlab": gitlab}


def _need(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "")
    if not value:
        raise Failed(f"{name} is not set")
    return value


def _call(forge: Forge, method: str, url: str, body: Mapping[str, Any] | None = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    headers = {**forge.headers, "User-Agent": "overlay-lint", **({"Content-Type": "application/json"} if data else {})}
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            return json.loads(response.read() or b"null")
    except urllib.error.HTTPError as err:
        if err.code in _DENIED:
            raise Skipped(f"{method} {_path(url)}: HTTP {err.code} (the token may not comment here)") from None
        raise Failed(f"{method} {_path(url)}: HTTP {err.code} {err.reason}") from None
    except (urllib.error.URLError, OSError, ValueError) as err:
        raise Failed(f"{method} {_path(url)}: {getattr(err, 'reason', err)}") from None


def _path(url: str) -> str:
    return urllib.parse.urlsplit(url).path


def _ours(forge: Forge) -> tuple[int, str] | None:
    """The id and body of the comment the marker names, if one was posted before."""
    for page in range(1, MAX_PAGES + 1):
        listed = _call(forge, "GET", f"{forge.comments}?per_page={PER_PAGE}&page={page}")
        if not isinstance(listed, list):
            raise Failed(f"GET {_path(forge.comments)}: not a list of comments")
        for comment in listed:
            body = comment.get("body") if isinstance(comment, dict) else None
            if isinstance(body, str) and body.startswith(diffview.MARKER):
                return int(comment["id"]), body
        if len(listed) < PER_PAGE:
            return None
    return None


def post(forge: Forge, body: str) -> str:
    """Create, update or leave the comment; what was done, in a few words."""
    found = _ours(forge)
    if found is not None:
        comment_id, earlier = found
        if earlier == body:
            return f"comment {comment_id} is up to date"
        _call(forge, forge.edit, forge.url_of(comment_id), {"body": body})
        return f"updated comment {comment_id}"
    match = _CHANGES.match(body)
    if match is not None and int(match.group(1)) == 0:
        return "nothing changed: no comment"
    created = _call(forge, "POST", forge.comments, {"body": body})
    return f"created comment {created.get('id') if isinstance(created, dict) else '?'}"


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None,
         err: TextIO | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    environ = os.environ if env is None else env
    stream = sys.stderr if err is None else err
    if len(args) != 2 or args[0] not in FORGES:
        stream.write("usage: python -m lint.prcomment github|gitlab BODY.md\n")
        return 2
    try:
        with open(args[1], encoding="utf-8") as handle:
            body = handle.read()
    except OSError as problem:
        stream.write(f"overlay-lint comment: error: {args[1]}: {problem.strerror or problem}\n")
        return 2
    if not body.startswith(diffview.MARKER):
        stream.write(f"overlay-lint comment: error: {args[1]} is not `overlay-lint diff --format markdown` output\n")
        return 2
    try:
        done = post(FORGES[args[0]](environ), body)
    except Skipped as why:
        stream.write(f"overlay-lint comment: warning: skipped: {why}\n")
        return 0
    except Failed as why:
        stream.write(f"overlay-lint comment: error: {why}\n")
        return 2
    stream.write(f"overlay-lint comment: {done}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
