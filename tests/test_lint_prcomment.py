"""`python -m lint.prcomment`: one pull-request comment (GitHub) or merge-request note (GitLab), created once and
then updated in place, against a fake API on 127.0.0.1 that checks every request."""

from __future__ import annotations

import io
import pathlib

from lint import diffview, prcomment
from tests.lint_support import fake_forge

GITHUB_LIST = "/repos/team/gitops/issues/7/comments"
GITLAB_LIST = "/api/v4/projects/group%2Fgitops/merge_requests/3/notes"


def body(tmp_path: pathlib.Path, text: str, changes: int = 1) -> str:
    path = tmp_path / f"body-{changes}-{abs(hash(text))}.md"
    path.write_text(f"{diffview.MARKER} changes={changes} -->\n{text}\n", encoding="utf-8")
    return str(path)


def post(forge: str, path: str, env: dict[str, str]) -> tuple[int, str]:
    err = io.StringIO()
    return prcomment.main([forge, path], env=env, err=err), err.getvalue()


def github_env(url: str, token: str = "s3cret") -> dict[str, str]:
    return {"GITHUB_TOKEN": token, "GITHUB_API_URL": url, "GITHUB_REPOSITORY": "team/gitops", "PR_NUMBER": "7"}


def test_github_creates_then_updates_one_comment(tmp_path: pathlib.Path) -> None:
    with fake_forge([GITHUB_LIST]) as (url, api):
        api.comments[GITHUB_LIST][5] = "a reviewer's comment"
        code, said = post("github", body(tmp_path, "first"), github_env(url))
        assert code == 0 and "created comment" in said
        ours = [i for i, b in api.comments[GITHUB_LIST].items() if b.startswith(diffview.MARKER)]
        assert len(ours) == 1
        code, said = post("github", body(tmp_path, "second"), github_env(url))
        assert code == 0 and f"updated comment {ours[0]}" in said
        assert api.comments[GITHUB_LIST][ours[0]].endswith("second\n")
        assert api.comments[GITHUB_LIST][5] == "a reviewer's comment"
        assert [m for m, _ in api.log] == ["GET", "POST", "GET", "PATCH"]
        assert api.log[-1] == ("PATCH", f"/repos/team/gitops/issues/comments/{ours[0]}")
        # The same body again: nothing is written.
        code, said = post("github", body(tmp_path, "second"), github_env(url))
        assert code == 0 and "up to date" in said and api.log[-1][0] == "GET"


def test_a_comment_past_the_first_page_is_found(tmp_path: pathlib.Path) -> None:
    with fake_forge([GITHUB_LIST]) as (url, api):
        api.comments[GITHUB_LIST].update({i: f"chatter {i}" for i in range(150)})
        api.comments[GITHUB_LIST][500] = f"{diffview.MARKER} changes=3 -->\nold"
        code, said = post("github", body(tmp_path, "new"), github_env(url))
        assert code == 0 and "updated comment 500" in said
        assert [m for m, _ in api.log] == ["GET", "GET", "PATCH"]


def test_no_change_creates_nothing_but_updates_an_earlier_comment(tmp_path: pathlib.Path) -> None:
    with fake_forge([GITHUB_LIST]) as (url, api):
        code, said = post("github", body(tmp_path, "nothing", changes=0), github_env(url))
        assert code == 0 and "no comment" in said and api.comments[GITHUB_LIST] == {}
        post("github", body(tmp_path, "something"), github_env(url))
        code, said = post("github", body(tmp_path, "nothing", changes=0), github_env(url))
        assert code == 0 and "updated" in said
        assert next(iter(api.comments[GITHUB_LIST].values())).endswith("nothing\n")


def test_a_token_without_permission_skips(tmp_path: pathlib.Path) -> None:
    with fake_forge([GITHUB_LIST]) as (url, api):
        api.denied = True
        code, said = post("github", body(tmp_path, "x"), github_env(url))
        assert code == 0 and "skipped" in said and "403" in said
        code, said = post("github", body(tmp_path, "x"), github_env(url, token=""))
        assert code == 0 and "skipped: no GITHUB_TOKEN" in said
        code, said = post("github", body(tmp_path, "x"), github_env(url, token="wrong"))
        assert code == 0 and "skipped" in said


def test_errors_exit_2(tmp_path: pathlib.Path) -> None:
    not_a_diff = tmp_path / "other.md"
    not_a_diff.write_text("hello\n", encoding="utf-8")
    assert post("github", str(not_a_diff), {})[0] == 2
    assert post("github", str(tmp_path / "missing.md"), {})[0] == 2
    assert post("bitbucket", body(tmp_path, "x"), {})[0] == 2
    code, said = post("github", body(tmp_path, "x"), {"GITHUB_TOKEN": "t", "GITHUB_REPOSITORY": "a/b"})
    assert code == 2 and "PR_NUMBER is not set" in said
    # Nothing listens on port 9.
    code, said = post("github", body(tmp_path, "x"), github_env("http://127.0.0.1:9"))
    assert code == 2 and "error" in said


def test_gitlab_note_created_then_updated(tmp_path: pathlib.Path) -> None:
    with fake_forge([GITLAB_LIST]) as (url, api):
        env = {"OVERLAY_LINT_GITLAB_TOKEN": "s3cret", "CI_API_V4_URL": f"{url}/api/v4",
               "CI_PROJECT_ID": "group/gitops", "CI_MERGE_REQUEST_IID": "3"}
        assert post("gitlab", body(tmp_path, "one"), env)[0] == 0
        code, said = post("gitlab", body(tmp_path, "two"), env)
        assert code == 0 and "updated" in said
        assert [m for m, _ in api.log] == ["GET", "POST", "GET", "PUT"]
        assert next(iter(api.comments[GITLAB_LIST].values())).endswith("two\n")
        code, said = post("gitlab", body(tmp_path, "x"), {**env, "OVERLAY_LINT_GITLAB_TOKEN": ""})
        assert code == 0 and "CI_JOB_TOKEN cannot write notes" in said
