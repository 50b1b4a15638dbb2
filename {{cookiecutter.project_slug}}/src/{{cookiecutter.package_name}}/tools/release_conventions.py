"""release_conventions: how plan_release reads a list of changes, as resources (the samples of a
resource, a resource template and a completer).

`release://conventions` is the whole guide; `release://conventions/{commit_type}` is one
Conventional Commits type, and its `commit_type` is completed as the user types
(completion/complete). A host can attach either to a conversation, so that its model writes
`changes` that plan_release sorts the way the user means.

Both are worked out from `_release_notes.py`, the code plan_release runs, so they cannot say
something the tool does not do. They change only when this code does, and they are the same for
every caller: any cache may keep them, for an hour (`cache_scope="public"`,
`cache_ttl_seconds`; server/utilities/caching). A resource that reads a file, a database or
anything that depends on who asks keeps the defaults instead (ttlMs 0, "private": every read
is fetched anew, and no shared cache keeps it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal

from . import registry
from ._release_notes import section_of, suggest

__all__ = ("COMMIT_TYPES", "commit_type", "complete_commit_type", "release_conventions")

#: Conventional Commits 1.0.0 names only `feat` and `fix`; the others are the common set it
#: points to (@commitlint/config-conventional), most used first: the order completions come in.
CommitType = Literal[
    "feat", "fix", "docs", "refactor", "perf", "test", "build", "ci", "chore", "style", "revert"
]
#: What each type means (tests/test_release_conventions.py checks it names each CommitType once).
COMMIT_TYPES: Final[dict[CommitType, str]] = {
    "feat": "a new feature",
    "fix": "a bug fix",
    "docs": "documentation only",
    "refactor": "a change that neither fixes a bug nor adds a feature",
    "perf": "a change that makes it faster",
    "test": "tests added or corrected",
    "build": "the build system or the dependencies",
    "ci": "the continuous integration setup",
    "chore": "other maintenance, touching no source or test",
    "style": "formatting only, no change in meaning",
    "revert": "undoes an earlier change",
}
#: What the examples say the last release was.
_PREVIOUS: Final = "1.4.2"
#: How long any cache may keep these pages: they change only with this code.
_TTL_SECONDS: Final = 3600


def _entry(kind: CommitType) -> list[str]:
    plain, broken = f"{kind}: something", f"{kind}!: something"
    bump = suggest(_PREVIOUS, None, [plain])
    breaking = suggest(_PREVIOUS, None, [broken])
    return [
        f"- `{kind}: ...` is {COMMIT_TYPES[kind]}: plan_release lists it under "
        f"**{section_of(plain)}** and, with nothing bigger among the changes, suggests a "
        f"{bump.kind} release ({_PREVIOUS} to {bump.version}).",
        f"- `{kind}!: ...` (or a `BREAKING CHANGE` footer) is under **{section_of(broken)}**, and "
        f"suggests a {breaking.kind} release ({_PREVIOUS} to {breaking.version}; before 1.0.0, "
        f"a minor one: 0.4.2 to {suggest('0.4.2', None, [broken]).version}).",
    ]


@registry.resource(
    "release://conventions",
    title="How plan_release reads changes",
    mime_type="text/markdown",
    cache_ttl_seconds=_TTL_SECONDS,
    cache_scope="public",
)
def release_conventions() -> str:
    """How plan_release sorts `changes` into release notes and picks the version to suggest."""
    lines = [
        "# How plan_release reads changes",
        "",
        "Write each change as a Conventional Commits subject, `type(scope)!: description` "
        "(the scope and the `!` are optional); anything else is listed under Other changes.",
        "The biggest change decides the version suggested: a breaking one, then a feature, "
        "then the rest.",
        "",
    ]
    for kind in COMMIT_TYPES:
        lines += [f"## {kind}", "", *_entry(kind), ""]
    return "\n".join(lines)


@registry.resource_template(
    "release://conventions/{commit_type}",
    title="One commit type, as plan_release reads it",
    mime_type="text/markdown",
    cache_ttl_seconds=_TTL_SECONDS,
    cache_scope="public",
)
def commit_type(commit_type: CommitType) -> str:
    """What plan_release does with a change of one Conventional Commits type."""
    # A type not in CommitType never gets here: the runtime answers -32602 for that URI.
    return "\n".join([f"# {commit_type}", "", *_entry(commit_type)]) + "\n"


@registry.completion(
    resource_template="release://conventions/{commit_type}", argument="commit_type"
)
def complete_commit_type(value: str, arguments: Mapping[str, str]) -> list[str]:
    """The commit types that start with what the user typed, most used first."""
    typed = value.strip().lower()
    return [kind for kind in COMMIT_TYPES if kind.startswith(typed)]
