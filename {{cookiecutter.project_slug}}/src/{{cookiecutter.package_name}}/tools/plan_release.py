"""plan_release: plan a software release over three rounds of questions (the AWS-free sample).

Round 1 asks for the version and the kind of release; round 2 for the highlights (and, for a
major release, the upgrade notes), worded with round 1's answers; round 3 for a yes on the
finished plan. A host without forms still gets a plan: drafted by its own model when it offers
sampling, or from the arguments alone, with a list of what was assumed.

Everything the tool returns is a function of its arguments and the answers so far: no clock,
no randomness, no state between rounds. That is what lets the runtime replay a round, retry it
after a restart, or serve it in another process (docs/multi-round-handlers.md). It is
read-only: it plans a release, it publishes nothing.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..mrtr_runtime import (
    Context,
    ElicitResult,
    InputRequest,
    InputRequired,
    SamplingResult,
    ToolAnnotations,
    ToolResult,
    elicit_form,
    sample,
)
from . import registry

__all__ = ("PlanReleaseArgs", "ReleasePlan", "plan_release")

Kind = Literal["major", "minor", "patch"]
Status = Literal["confirmed", "declined", "cancelled", "drafted"]
Step = Literal["version", "highlights", "confirmation"]

# The input keys are ours (mrtr: "server assigned identifiers"); clients echo them verbatim.
RELEASE: Final = "release"
HIGHLIGHTS: Final = "highlights"
MIGRATION: Final = "migration"
DRAFT: Final = "draft"
CONFIRM_PREFIX: Final = "confirm-"

# semver.org 2.0.0 (the regex it recommends, without named groups so that the same text is a
# valid ECMA-262 `pattern` for the form), plus the leading "v" people type out of habit.
_SEMVER_TEXT: Final = (
    r"v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?"
)
_SEMVER: Final = re.compile(_SEMVER_TEXT)
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


# -- versions ---------------------------------------------------------------------------------


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


# -- arguments and result ---------------------------------------------------------------------


class PlanReleaseArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    project: str = Field(
        min_length=1, max_length=100, pattern=r"^[^\r\n]+$", description="The project's name"
    )
    previous_version: str | None = Field(
        default=None, description="The last released version (semantic version), if any"
    )
    changes: list[Annotated[str, Field(min_length=1, max_length=500)]] = Field(
        default_factory=list,
        max_length=200,
        description=(
            "What changed since the last release: commit subjects or pull-request titles. "
            "Conventional Commits prefixes (feat:, fix:, feat!:) sort them and suggest the version."
        ),
    )
    version: str | None = Field(
        default=None,
        description="The version to release, if decided; otherwise it is suggested and asked",
    )

    @field_validator("previous_version", "version")
    @classmethod
    def check_semver(cls, value: str | None) -> str | None:
        if value is not None and Version.parse(value) is None:
            raise ValueError(f"{_quote(value)} is not a semantic version (MAJOR.MINOR.PATCH)")
        return value

    @model_validator(mode="after")
    def check_order(self) -> PlanReleaseArgs:
        if self.version and self.previous_version:
            problem = _not_after(Version.parse(self.version), Version.parse(self.previous_version))
            if problem:
                raise ValueError(problem)
        return self


class ReleasePlan(BaseModel):
    """The plan (structuredContent); `status` says who decided it and whether to act on it."""

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


# -- the forms (client/elicitation: flat objects of primitives) -------------------------------


class VersionForm(BaseModel):
    # The pattern is for hosts that check it as the user types; the handler re-checks and
    # re-asks with a reason, because "Servers SHOULD validate received data".
    version: str = Field(
        title="Version",
        description="MAJOR.MINOR.PATCH, e.g. 1.4.0",
        json_schema_extra={"pattern": f"^{_SEMVER_TEXT}$", "maxLength": 64},
    )
    kind: Kind = Field(title="Kind of release", description="major, minor or patch")


class HighlightsForm(BaseModel):
    highlights: str = Field(
        title="Highlights",
        description="What users should know first; separate several with ';'",
        json_schema_extra={"minLength": 1},
    )


class MigrationForm(BaseModel):
    migration: str = Field(
        title="Upgrading",
        description="What breaks, and what users change to upgrade",
        json_schema_extra={"minLength": 1},
    )


class ConfirmForm(BaseModel):
    confirmed: bool = Field(title="The plan is right")


# -- what the changes suggest -----------------------------------------------------------------


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


@dataclass(frozen=True)
class Suggestion:
    """The version the arguments point at, and why: the default for every path."""

    version: Version
    kind: Kind
    reason: str


def suggest(args: PlanReleaseArgs) -> Suggestion:
    changes = [classify(change) for change in args.changes]
    groups = {change.group for change in changes}
    previous = Version.parse(args.previous_version) if args.previous_version else None
    if "breaking" in groups:
        # semver §4: in 0.y.z anything may change, and by convention a break bumps the minor.
        kind: Kind = "minor" if previous is not None and previous.major == 0 else "major"
        why = "the changes include a breaking change"
    elif "feature" in groups:
        kind, why = "minor", "the changes add features"
    else:
        kind, why = "patch", "the changes hold no feature and no breaking change"
    given = Version.parse(args.version) if args.version is not None else None
    if given is not None:
        actual = _bump_kind(previous, given) if previous is not None else None
        return Suggestion(given, actual or kind, "it was given as `version`")
    if previous is None:
        return Suggestion(
            Version(0, 1, 0), "minor", "no previous_version was given (a first release)"
        )
    return Suggestion(previous.bump(kind), kind, f"{why}, after {previous}")


# -- the handler ------------------------------------------------------------------------------


@registry.tool(
    title="Plan a release",
    annotations=ToolAnnotations(
        title="Plan a release", read_only=True, idempotent=True, open_world=False
    ),
    output_model=ReleasePlan,
)
async def plan_release(args: PlanReleaseArgs, ctx: Context) -> ToolResult | InputRequired:
    """Plan a release: choose the version, draft the release notes, list the steps to ship it.

    Asks the user in three short forms (version and kind; highlights; a final yes) when the
    host can show forms. Otherwise it drafts the plan from `changes` -- with the host's model
    when the host offers sampling -- and lists what it assumed. Publishes nothing.
    """
    suggestion = suggest(args)
    ask_draft = _ask_draft(args, suggestion)
    way = _choose_way(ctx, {RELEASE: _ask_release(args, suggestion), DRAFT: ask_draft})
    if way == RELEASE:
        return _with_forms(args, suggestion, ctx)
    if way == DRAFT:
        draft = ctx.input_response_as(DRAFT, SamplingResult)
        if draft is None:
            return ctx.request_input({DRAFT: ask_draft})
        return _drafted(args, suggestion, draft)
    return _drafted(args, suggestion, None)


def _choose_way(ctx: Context, ways: Mapping[str, InputRequest]) -> str | None:
    """The first way already answered; else the first this client can take; else None.

    Answers come first: capabilities arrive anew with every request (2026-07-28 basic/index),
    and a retry that declares more than the last one must not abandon the answers so far.
    """
    for key in ways:
        if ctx.input_response(key) is not None:
            return key
    return next((key for key, request in ways.items() if ctx.can_request(request)), None)


def _with_forms(
    args: PlanReleaseArgs, suggestion: Suggestion, ctx: Context
) -> ToolResult | InputRequired:
    # Round 1: version and kind.
    release = ctx.input_response_as(RELEASE, ElicitResult[VersionForm])
    if release is None:
        return ctx.request_input({RELEASE: _ask_release(args, suggestion)})
    if release.action != "accept":
        return _stopped(args, release.action, "version")
    if release.content is None:
        empty = "The form came back empty."
        return ctx.request_input({RELEASE: _ask_release(args, suggestion, empty)})
    version, problem = _check_release(release.content, args.previous_version)
    if version is None:
        return ctx.request_input({RELEASE: _ask_release(args, suggestion, problem)})
    kind = release.content.kind

    # Round 2: asked only now, because its wording (and, for a major release, its second
    # form) depends on round 1. Only the keys still missing or invalid are asked again.
    asks: dict[str, InputRequest] = {}
    highlights_answer = ctx.input_response_as(HIGHLIGHTS, ElicitResult[HighlightsForm])
    highlights: list[str] = []
    if highlights_answer is None:
        asks[HIGHLIGHTS] = _ask_highlights(args, version, kind)
    elif highlights_answer.action != "accept":
        return _stopped(args, highlights_answer.action, "highlights", version, kind)
    else:
        content = highlights_answer.content
        highlights = split_highlights(content.highlights) if content else []
        if not highlights:
            asks[HIGHLIGHTS] = _ask_highlights(args, version, kind, "No highlight was given.")
    migration: str | None = None
    if kind == "major":
        migration_answer = ctx.input_response_as(MIGRATION, ElicitResult[MigrationForm])
        if migration_answer is None:
            asks[MIGRATION] = _ask_migration(args, version)
        elif migration_answer.action != "accept":
            return _stopped(args, migration_answer.action, "highlights", version, kind)
        else:
            migration_content = migration_answer.content
            migration = " ".join(migration_content.migration.split()) if migration_content else ""
            if not migration:
                asks[MIGRATION] = _ask_migration(args, version, "The upgrade notes were empty.")
    if asks:
        return ctx.request_input(asks)

    # Round 3: a yes to exactly this plan. The key carries a digest of the plan, so a yes
    # given to one plan never approves another one that later corrections produced.
    plan = _plan(args, "confirmed", version, kind, highlights, migration)
    confirm_key = CONFIRM_PREFIX + hashlib.sha256(plan.notes_markdown.encode()).hexdigest()[:12]
    confirm = ctx.input_response_as(confirm_key, ElicitResult[ConfirmForm])
    question = (
        f"Here is the plan for {args.project} {version}:\n\n{plan.notes_markdown}\nIs it right?"
    )
    if confirm is None:
        return ctx.request_input({confirm_key: elicit_form(question, ConfirmForm)})
    if confirm.action != "accept":
        return _stopped(args, confirm.action, "confirmation", version, kind)
    if confirm.content is None:
        question = f"The form came back empty. {question}"
        return ctx.request_input({confirm_key: elicit_form(question, ConfirmForm)})
    if not confirm.content.confirmed:
        return _stopped(args, "decline", "confirmation", version, kind)
    return _result(plan)


# -- asking -----------------------------------------------------------------------------------


def _ask_release(
    args: PlanReleaseArgs, suggestion: Suggestion, problem: str | None = None
) -> InputRequest:
    lines = [problem] if problem else []
    lines.append(f"Which version of {args.project} are you releasing?")
    if args.previous_version:
        lines.append(f"The last release was {args.previous_version}.")
    lines.append(
        f"Suggested: {suggestion.version} ({suggestion.kind}), because {suggestion.reason}."
    )
    return elicit_form(" ".join(lines), VersionForm)


def _ask_highlights(
    args: PlanReleaseArgs, version: Version, kind: Kind, problem: str | None = None
) -> InputRequest:
    lines = [problem] if problem else []
    lines.append(f"What are the highlights of {args.project} {version}, a {kind} release?")
    lines.append("Separate several with ';'.")
    notable = [change.text for change in map(classify, args.changes) if change.group != "other"]
    if notable:
        lines.append(f"From the changes: {'; '.join(notable[:5])}.")
    return elicit_form(" ".join(lines), HighlightsForm)


def _ask_migration(
    args: PlanReleaseArgs, version: Version, problem: str | None = None
) -> InputRequest:
    lines = [problem] if problem else []
    lines.append(
        f"{args.project} {version} is a major release: what breaks, and how do users upgrade?"
    )
    return elicit_form(" ".join(lines), MigrationForm)


def _ask_draft(args: PlanReleaseArgs, suggestion: Suggestion) -> InputRequest:
    changes = "\n".join(f"- {change}" for change in args.changes) or "- (no list of changes given)"
    prompt = (
        f"Write the highlights of {args.project} {suggestion.version}, a {suggestion.kind} "
        f"release, for its release notes. The changes since the last release:\n{changes}\n\n"
        "Answer with one to five highlights, one per line, each under 100 characters, "
        "written for users, with no preamble."
    )
    return sample(prompt, max_tokens=400, system_prompt="You write short, factual release notes.")


def _check_release(
    form: VersionForm, previous_text: str | None
) -> tuple[Version | None, str | None]:
    version = Version.parse(form.version)
    if version is None:
        return None, (
            f"{_quote(form.version)} is not a semantic version: use MAJOR.MINOR.PATCH, "
            "like 1.4.0 (or 2.0.0-rc.1 for a pre-release)."
        )
    previous = Version.parse(previous_text) if previous_text else None
    if previous is None:
        return version, None
    problem = _not_after(version, previous)
    if problem:
        return None, problem
    actual = _bump_kind(previous, version)
    # semver §4: before 1.0.0 anything may change at any time, so the kind is not checked.
    if actual is not None and previous.major > 0 and actual != form.kind:
        return None, f"{previous} to {version} is a {actual} release, not a {form.kind} one."
    return version, None


def _not_after(version: Version | None, previous: Version | None) -> str | None:
    if version is None or previous is None or version.precedence() > previous.precedence():
        return None
    return f"{version} does not come after the last release, {previous}."


def split_highlights(text: str) -> list[str]:
    """Highlights from one form field or a model's answer: split on ';' and lines, de-bulleted."""
    parts = re.split(r"[;\n]", text)
    cleaned = (re.sub(r"^\s*(?:[-*\u2022]|\d+[.)])\s*", "", part).strip() for part in parts)
    return [part for part in cleaned if part][:_MAX_HIGHLIGHTS]


# -- results ----------------------------------------------------------------------------------


def _plan(
    args: PlanReleaseArgs,
    status: Status,
    version: Version,
    kind: Kind,
    highlights: Sequence[str],
    migration: str | None,
    assumptions: Sequence[str] = (),
) -> ReleasePlan:
    tag = f"v{version}"
    return ReleasePlan(
        status=status,
        project=args.project,
        version=str(version),
        kind=kind,
        tag=tag,
        highlights=list(highlights),
        migration=migration,
        notes_markdown=_notes(args, version, highlights, migration),
        checklist=[
            f"Set the project's version to {version} where it is declared (e.g. pyproject.toml).",
            "Add these release notes to the top of CHANGELOG.md.",
            f"git tag -a {tag} -m {shlex.quote(f'{args.project} {version}')}",
            f"git push origin {tag}",
        ],
        assumptions=list(assumptions),
    )


def _notes(
    args: PlanReleaseArgs, version: Version, highlights: Sequence[str], migration: str | None
) -> str:
    lines = [f"## {args.project} {version}", ""]
    if highlights:
        lines += ["### Highlights", *(f"- {item}" for item in highlights), ""]
    if migration:
        lines += ["### Upgrading", migration, ""]
    changes = [classify(change) for change in args.changes]
    for group, title in _SECTIONS:
        items = [change.text for change in changes if change.group == group]
        if items:
            lines += [f"### {title}", *(f"- {item}" for item in items), ""]
    return "\n".join(lines).rstrip() + "\n"


def _drafted(
    args: PlanReleaseArgs, suggestion: Suggestion, draft: SamplingResult | None
) -> ToolResult:
    assumptions = [f"Version {suggestion.version} ({suggestion.kind}): {suggestion.reason}."]
    highlights = split_highlights(draft.text) if draft is not None else []
    if draft is not None and highlights:
        model = f" ({draft.model})" if draft.model else ""
        assumptions.append(f"The highlights were drafted by the host's model{model}; review them.")
    else:
        if draft is not None:
            assumptions.append("The host's model gave no usable highlights.")
        notable = [change.text for change in map(classify, args.changes) if change.group != "other"]
        highlights = notable[:5]
        assumptions.append(
            "The highlights are the notable changes as given."
            if highlights
            else "No notable changes were given, so there are no highlights."
        )
    assumptions.append("Nobody confirmed this plan: the host cannot show forms (elicitation).")
    plan = _plan(
        args, "drafted", suggestion.version, suggestion.kind, highlights, None, assumptions
    )
    return _result(plan)


def _stopped(
    args: PlanReleaseArgs,
    action: Literal["decline", "cancel"],
    step: Step,
    version: Version | None = None,
    kind: Kind | None = None,
) -> ToolResult:
    # client/elicitation: servers "MUST handle cases where the user declines or cancels". Both
    # are answers, not failures, so the result is an ordinary one that says what happened.
    return _result(
        ReleasePlan(
            status="declined" if action == "decline" else "cancelled",
            project=args.project,
            version=str(version) if version is not None else None,
            kind=kind,
            stopped_at=step,
        )
    )


_STEP_NAMES: Final[dict[Step, str]] = {
    "version": "the version form",
    "highlights": "the release-notes form",
    "confirmation": "the final confirmation",
}


def _result(plan: ReleasePlan) -> ToolResult:
    release = f"{plan.project} {plan.version}" if plan.version else plan.project
    if plan.status in ("declined", "cancelled"):
        how = "declined" if plan.status == "declined" else "dismissed"
        step = _STEP_NAMES[plan.stopped_at] if plan.stopped_at else "a form"
        text = (
            f"Release planning for {release} stopped: the user {how} {step}. "
            "Nothing is planned; do not tag or publish a release."
        )
    else:
        who = "confirmed by the user"
        if plan.status == "drafted":
            who = "drafted without asking the user"
        parts = [f"Release plan for {release} ({plan.kind}), {who}."]
        if plan.assumptions:
            parts.append("Assumed:\n" + "\n".join(f"- {item}" for item in plan.assumptions))
        parts.append(plan.notes_markdown.rstrip())
        steps = (f"{number}. {step}" for number, step in enumerate(plan.checklist, 1))
        parts.append("Steps:\n" + "\n".join(steps))
        text = "\n\n".join(parts)
    structured = plan.model_dump(mode="json")
    # server/tools: structured content SHOULD also be returned as serialised JSON in a text block.
    json_text = json.dumps(structured, ensure_ascii=False, indent=2, sort_keys=True)
    return ToolResult(
        content=({"type": "text", "text": text}, {"type": "text", "text": json_text}),
        structured=structured,
    )


def _quote(text: str) -> str:
    short = text if len(text) <= _QUOTE_LIMIT else text[: _QUOTE_LIMIT - 3] + "..."
    return json.dumps(short, ensure_ascii=False)
