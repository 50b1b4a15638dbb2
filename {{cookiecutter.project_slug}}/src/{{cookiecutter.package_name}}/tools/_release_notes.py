"""What `plan_release` knows about releases: semantic versions, commit messages, release notes.

Private to the tool (the leading underscore keeps `Registry.load_package` from loading it as a
tool module) and free of MCP: plain functions of their arguments, and the plan the tool returns.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from pydantic import BaseModel, Field

__all__ = (
    "SEMVER_PATTERN",
    "Change",
    "Kind",
    "ReleasePlan",
    "Status",
    "Step",
    "Suggestion",
    "Version",
    "check_release",
    "checklist",
    "classify",
    "make_plan",
    "not_after",
    "notable",
    "notes",
    "notes_outline",
    "quote",
    "section_of",
    "split_highlights",
    "suggest",
    "summary",
)

Kind = Literal["major", "minor", "patch"]
Status = Literal["confirmed", "declined", "cancelled", "drafted"]
Step = Literal["version", "highlights", "confirmation"]

# semver.org 2.0.0 (the regex it recommends, without named groups so that the same text is a
# valid ECMA-262 `pattern` for a form), plus the leading "v" people type out of habit.
SEMVER_PATTERN: Final = (
    r"v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?"
)
_SEMVER: Final = re.compile(SEMVER_PATTERN)
# Conventional Commits 1.0.0: `type(scope)!: description`; "!" or BREAKING CHANGE marks a break.
_CONVENTIONAL: Final = re.compile(r"([A-Za-z]+)(?:\([^)]*\))?(!)?:\s*(.+)", re.DOTALL)
_MAX_HIGHLIGHTS: Final = 10
_SECTIONS: Final = (
    ("breaking", "Breaking changes"),
    ("feature", "Features"),
    ("fix", "Fixes"),
    ("other", "Other changes"),
)
_QUOTE_LIMIT: Final = 40


@dataclass(frozen=True)
class Version:
    major: int
    minor: int
    patch: int
    prerelease: str = ""
    build: str = ""

    @classmethod
    def parse(cls, text: str) -> Version | None:
        found = _SEMVER.fullmatch(text.strip())
        if found is None:
            return None
        major, minor, patch, prerelease, build = found.groups()
        return cls(int(major), int(minor), int(patch), prerelease or "", build or "")

    @property
    def core(self) -> tuple[int, int, int]:
        return (self.major, self.minor, self.patch)

    def precedence(self) -> tuple[object, ...]:
        """semver §11: a pre-release sorts before its release; build metadata never counts."""
        if not self.prerelease:
            return (self.core, 1, ())
        # §11.4: numeric identifiers sort numerically and before alphanumeric ones, and a
        # longer list of equal identifiers wins -- exactly how tuples compare.
        ids = tuple(
            (0, int(part), "") if part.isdigit() else (1, 0, part)
            for part in self.prerelease.split(".")
        )
        return (self.core, 0, ids)

    def bump(self, kind: Kind) -> Version:
        """The next version of `kind`; a pre-release becomes its own release (as npm does)."""
        pre = bool(self.prerelease)
        if kind == "major":
            same = pre and self.minor == 0 and self.patch == 0
            return Version(self.major if same else self.major + 1, 0, 0)
        if kind == "minor":
            same = pre and self.patch == 0
            return Version(self.major, self.minor if same else self.minor + 1, 0)
        return Version(self.major, self.minor, self.patch if pre else self.patch + 1)

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.prerelease:
            text += f"-{self.prerelease}"
        return f"{text}+{self.build}" if self.build else text


def _bump_kind(previous: Version, new: Version) -> Kind | None:
    """Which number `new` moves on from `previous`; None for a pre-release to its release."""
    if new.core == previous.core:
        return None
    if new.major != previous.major:
        return "major"
    return "minor" if new.minor != previous.minor else "patch"


def not_after(version: Version | None, previous: Version | None) -> str | None:
    """Why `version` cannot follow `previous`, or None when it can (or either is unknown)."""
    if version is None or previous is None or version.precedence() > previous.precedence():
        return None
    return f"{version} does not come after the last release, {previous}."


def check_release(
    text: str, kind: Kind, previous_text: str | None
) -> tuple[Version | None, str | None]:
    """The version the user typed, or None and why it cannot be released after the last one."""
    version = Version.parse(text)
    if version is None:
        return None, (
            f"{quote(text)} is not a semantic version: use MAJOR.MINOR.PATCH, "
            "like 1.4.0 (or 2.0.0-rc.1 for a pre-release)."
        )
    previous = Version.parse(previous_text) if previous_text else None
    if previous is None:
        return version, None
    problem = not_after(version, previous)
    if problem:
        return None, problem
    actual = _bump_kind(previous, version)
    # semver §4: before 1.0.0 anything may change at any time, so the kind is not checked.
    if actual is not None and previous.major > 0 and actual != kind:
        return None, f"{previous} to {version} is a {actual} release, not a {kind} one."
    return version, None


@dataclass(frozen=True)
class Change:
    group: Literal["breaking", "feature", "fix", "other"]
    text: str


def classify(change: str) -> Change:
    text = " ".join(change.split())
    breaking = "BREAKING CHANGE" in change
    found = _CONVENTIONAL.fullmatch(text)
    if found is None:
        return Change("breaking" if breaking else "other", text)
    kind, bang, description = found.groups()
    if bang or breaking:
        return Change("breaking", description)
    groups: dict[str, Literal["feature", "fix"]] = {"feat": "feature", "fix": "fix"}
    return Change(groups.get(kind.lower(), "other"), description)


def section_of(change: str) -> str:
    """The release notes' section a change goes under ("Features", "Breaking changes"...)."""
    return dict(_SECTIONS)[classify(change).group]


def notable(changes: Sequence[str]) -> list[str]:
    """The changes worth a highlight: breaking changes, features and fixes."""
    return [change.text for change in map(classify, changes) if change.group != "other"]


@dataclass(frozen=True)
class Suggestion:
    """The version the arguments point at, and why: the default for every path."""

    version: Version
    kind: Kind
    reason: str


def suggest(
    previous_version: str | None, version: str | None, changes: Sequence[str]
) -> Suggestion:
    groups = {classify(change).group for change in changes}
    previous = Version.parse(previous_version) if previous_version else None
    if "breaking" in groups:
        # semver §4: in 0.y.z anything may change, and by convention a break bumps the minor.
        kind: Kind = "minor" if previous is not None and previous.major == 0 else "major"
        why = "the changes include a breaking change"
    elif "feature" in groups:
        kind, why = "minor", "the changes add features"
    else:
        kind, why = "patch", "the changes hold no feature and no breaking change"
    given = Version.parse(version) if version is not None else None
    if given is not None:
        actual = _bump_kind(previous, given) if previous is not None else None
        return Suggestion(given, actual or kind, "it was given as `version`")
    if previous is None:
        return Suggestion(
            Version(0, 1, 0), "minor", "no previous_version was given (a first release)"
        )
    return Suggestion(previous.bump(kind), kind, f"{why}, after {previous}")


def split_highlights(text: str) -> list[str]:
    """Highlights from one form field or a model's answer: split on ';' and lines, de-bulleted."""
    parts = re.split(r"[;\n]", text)
    cleaned = (re.sub(r"^\s*(?:[-*\u2022]|\d+[.)])\s*", "", part).strip() for part in parts)
    return [part for part in cleaned if part][:_MAX_HIGHLIGHTS]


def notes(
    project: str,
    version: Version,
    highlights: Sequence[str],
    migration: str | None,
    changes: Sequence[str],
) -> str:
    """The release notes in Markdown: highlights, upgrade notes, then the changes by kind."""
    lines = [f"## {project} {version}", ""]
    if highlights:
        lines += ["### Highlights", *(f"- {item}" for item in highlights), ""]
    if migration:
        lines += ["### Upgrading", migration, ""]
    classified = [classify(change) for change in changes]
    for group, title in _SECTIONS:
        items = [change.text for change in classified if change.group == group]
        if items:
            lines += [f"### {title}", *(f"- {item}" for item in items), ""]
    return "\n".join(lines).rstrip() + "\n"


def notes_outline(markdown: str) -> str:
    """What the notes hold, counted, for a line a host shows: "2 highlights, upgrading notes,
    3 features, 1 fix"."""
    counts: list[tuple[str, int]] = []
    for line in markdown.splitlines():
        if line.startswith("### "):
            counts.append((line[4:], 0))
        elif counts and line.strip():
            counts[-1] = (counts[-1][0], counts[-1][1] + 1)
    parts = []
    for section, count in counts:
        if section == "Upgrading":
            parts.append("upgrading notes")
            continue
        noun = section.lower()
        if count == 1:
            noun = {"highlights": "highlight", "features": "feature", "fixes": "fix"}.get(
                noun, noun.replace("changes", "change")
            )
        parts.append(f"{count} {noun}")
    return ", ".join(parts) or "no changes listed"


def checklist(project: str, version: Version) -> list[str]:
    tag = f"v{version}"
    return [
        f"Set the project's version to {version} where it is declared (e.g. pyproject.toml).",
        "Add these release notes to the top of CHANGELOG.md.",
        f"git tag -a {tag} -m {shlex.quote(f'{project} {version}')}",
        f"git push origin {tag}",
    ]


def quote(text: str) -> str:
    short = text if len(text) <= _QUOTE_LIMIT else text[: _QUOTE_LIMIT - 3] + "..."
    return json.dumps(short, ensure_ascii=False)


class ReleasePlan(BaseModel):
    """The plan (structuredContent); `status` says who decided it and whether to act on it."""

    # A host may hand its model this object rather than the text (Claude Code does): the
    # sentence a person reads first comes with it, and what does not apply is left out.
    message: str = Field(default="", description="What the plan is, as a sentence.")
    status: Status = Field(
        description=(
            "confirmed: the user approved it. declined/cancelled: the user stopped at "
            "`stopped_at`, so nothing should be released. drafted: nobody was asked; "
            "`assumptions` lists what the plan assumed."
        )
    )
    project: str
    version: str | None = None
    kind: Kind | None = None
    tag: str | None = None
    highlights: list[str] = Field(default_factory=list)
    migration: str | None = None
    notes_markdown: str = ""
    checklist: list[str] = Field(default_factory=list)
    assumptions: list[str] = Field(default_factory=list)
    stopped_at: Step | None = None


def make_plan(
    project: str,
    changes: Sequence[str],
    status: Status,
    version: Version,
    kind: Kind,
    highlights: list[str],
    migration: str | None,
) -> ReleasePlan:
    return ReleasePlan(
        status=status,
        project=project,
        version=str(version),
        kind=kind,
        tag=f"v{version}",
        highlights=highlights,
        migration=migration,
        notes_markdown=notes(project, version, highlights, migration, changes),
        checklist=checklist(project, version),
    )


_STEP_NAMES: Final[dict[Step, str]] = {
    "version": "the version form",
    "highlights": "the release-notes form",
    "confirmation": "the final confirmation",
}


def summary(plan: ReleasePlan) -> str:
    """The plan as a person (or a model shown only text) reads it."""
    release = f"{plan.project} {plan.version}" if plan.version else plan.project
    if plan.status in ("declined", "cancelled"):
        how = "declined" if plan.status == "declined" else "dismissed"
        step = _STEP_NAMES[plan.stopped_at] if plan.stopped_at else "a form"
        return (
            f"Release planning for {release} stopped: the user {how} {step}. "
            "Nothing is planned; do not tag or publish a release."
        )
    who = "drafted without asking the user" if plan.status == "drafted" else "confirmed by the user"
    parts = [f"Release plan for {release} ({plan.kind}), {who}."]
    if plan.assumptions:
        parts.append("Assumed:\n" + "\n".join(f"- {item}" for item in plan.assumptions))
    parts.append(plan.notes_markdown.rstrip())
    steps = (f"{number}. {step}" for number, step in enumerate(plan.checklist, 1))
    parts.append("Steps:\n" + "\n".join(steps))
    return "\n\n".join(parts)
