"""plan_release: plan a software release over three rounds of questions (the AWS-free sample).

Round 1 asks for the version and the kind of release; round 2 for the highlights (and, for a
major release, the upgrade notes in the same round), worded with round 1's answers; round 3
for a yes on the finished plan. A host without forms still gets a plan: drafted by its own
model when it offers sampling, or from the arguments alone, with a list of what was assumed.

Everything the tool returns is a function of its arguments and the answers so far: no clock,
no randomness, nothing kept between rounds. That is what lets the runtime replay a round,
retry it after a restart, or serve it in another process (docs/multi-round-handlers.md). It is
read-only: it plans a release, it publishes nothing. Versions, commit messages and the notes
themselves are `_release_notes.py` beside this module.
"""

from __future__ import annotations

import hashlib
from typing import Annotated, Final

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..mrtr_runtime import (
    Accepted,
    Cancelled,
    Context,
    Declined,
    InputRequest,
    InputRequired,
    SamplingResult,
    ToolAnnotations,
    ToolResult,
    elicit_form,
    sample,
)
from . import registry
from ._release_notes import (
    SEMVER_PATTERN,
    Kind,
    ReleasePlan,
    Step,
    Suggestion,
    Version,
    check_release,
    make_plan,
    not_after,
    notable,
    notes_outline,
    quote,
    split_highlights,
    suggest,
    summary,
)

__all__ = ("PlanReleaseArgs", "ReleasePlan", "plan_release")

# The input keys are ours (mrtr: "server assigned identifiers"); clients echo them verbatim.
RELEASE: Final = "release"
HIGHLIGHTS: Final = "highlights"
MIGRATION: Final = "migration"
DRAFT: Final = "draft"
CONFIRM_PREFIX: Final = "confirm-"
NOTES_PREFIX: Final = "notes-"


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
            raise ValueError(f"{quote(value)} is not a semantic version (MAJOR.MINOR.PATCH)")
        return value

    @model_validator(mode="after")
    def check_order(self) -> PlanReleaseArgs:
        if self.version and self.previous_version:
            problem = not_after(Version.parse(self.version), Version.parse(self.previous_version))
            if problem:
                raise ValueError(problem)
        return self


# -- the forms (client/elicitation: flat objects of primitives) -------------------------------


class VersionForm(BaseModel):
    # The pattern is for hosts that check it as the user types; the handler re-checks and
    # re-asks with a reason, because "Servers SHOULD validate received data".
    version: str = Field(
        title="Version",
        description="MAJOR.MINOR.PATCH, e.g. 1.4.0",
        json_schema_extra={"pattern": f"^{SEMVER_PATTERN}$", "maxLength": 64},
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
    confirmed: bool = Field(
        title="Release with these notes",
        description="Yes approves exactly the notes shown (their sha256); no stops here.",
    )


# -- the handler ------------------------------------------------------------------------------


@registry.tool(
    title="Plan a release",
    annotations=ToolAnnotations(
        title="Plan a release", read_only=True, idempotent=True, open_world=False
    ),
    output_model=ReleasePlan,
)
async def plan_release(args: PlanReleaseArgs, *, ctx: Context) -> ToolResult | InputRequired:
    """Plan a release: choose the version, draft the release notes, list the steps to ship it.

    Asks the user in three short forms (version and kind; highlights; a final yes) when the
    host can show forms. Otherwise it drafts the plan from `changes` -- with the host's model
    when the host offers sampling -- and lists what it assumed. Publishes nothing.
    """
    suggestion = suggest(args.previous_version, args.version, args.changes)
    ask_draft = _ask_draft(args, suggestion)
    # Answers first: a way already answered is kept, whatever this retry declares (capabilities
    # arrive anew with every request); else the first way this client can take; else none.
    draft = ctx.input_response_as(DRAFT, SamplingResult)
    if draft is not None:
        return _drafted(args, suggestion, draft)
    if ctx.form_answer(RELEASE, VersionForm) is not None or ctx.can_request(
        _ask_release(args, suggestion)
    ):
        return _with_forms(args, suggestion, ctx)
    if ctx.can_request(ask_draft):
        return ctx.request_input({DRAFT: ask_draft})
    return _drafted(args, suggestion, None)


def _with_forms(
    args: PlanReleaseArgs, hint: Suggestion, ctx: Context
) -> ToolResult | InputRequired:
    # Round 1: version and kind. An answer that fails our checks is asked again with the reason.
    match ctx.form_answer(RELEASE, VersionForm):
        case None:
            return ctx.request_input({RELEASE: _ask_release(args, hint)})
        case Declined() | Cancelled() as refusal:
            return _stopped(args, refusal, "version")
        case Accepted(content=form):
            version, problem = check_release(form.version, form.kind, args.previous_version)
            if version is None:
                return ctx.request_input({RELEASE: _ask_release(args, hint, problem)})
            kind = form.kind

    # Round 2: several questions in one round, worded with round 1's answers. Each is read on
    # its own; only the ones still missing (or that fail a check, with the reason) are asked.
    asks: dict[str, InputRequest] = {}
    highlights: list[str] = []
    match ctx.form_answer(HIGHLIGHTS, HighlightsForm):
        case None:
            asks[HIGHLIGHTS] = _ask_highlights(args, version, kind)
        case Declined() | Cancelled() as refusal:
            return _stopped(args, refusal, "highlights", version, kind)
        case Accepted(content=given):
            highlights = split_highlights(given.highlights)
            if not highlights:
                asks[HIGHLIGHTS] = _ask_highlights(args, version, kind, "No highlight was given.")
    migration: str | None = None
    if kind == "major":  # one key per variant of a question: only a major release has this one
        match ctx.form_answer(MIGRATION, MigrationForm):
            case None:
                asks[MIGRATION] = _ask_migration(args, version)
            case Declined() | Cancelled() as refusal:
                return _stopped(args, refusal, "highlights", version, kind)
            case Accepted(content=upgrade):
                migration = " ".join(upgrade.migration.split())
                if not migration:
                    why = "The upgrade notes were empty."
                    asks[MIGRATION] = _ask_migration(args, version, why)
    if asks:
        return ctx.request_input(asks)

    # Round 3: a yes to exactly this plan. The key carries a digest of the plan, so a yes
    # given to one plan never approves another one that later corrections produced.
    plan = make_plan(args.project, args.changes, "confirmed", version, kind, highlights, migration)
    notes_digest = hashlib.sha256(plan.notes_markdown.encode()).hexdigest()[:12]
    confirm_key = CONFIRM_PREFIX + notes_digest
    match ctx.form_answer(confirm_key, ConfirmForm):
        case None:
            # The notes do not fit the lines a host shows of a question: where the host can
            # open a link, the full notes are a page of their own, asked first (its answer
            # only says whether the user opened it: the yes is the form's).
            title = f"{plan.project} {plan.version}: release notes (sha256 {notes_digest})"
            where = f"The full release notes of {plan.project} {plan.version}, to read first."
            review = ctx.review_page(plan.notes_markdown, title=title, message=where)
            question = confirm_message(plan, notes_digest, linked=review is not None)
            asks = {confirm_key: elicit_form(question, ConfirmForm)}
            if review is not None:
                asks = {NOTES_PREFIX + notes_digest: review, **asks}
            return ctx.request_input(asks)
        case Accepted(content=ConfirmForm(confirmed=True)):
            return _answered(plan)
        case Accepted():  # "no" to the plan is a decline
            return _stopped(args, Declined(), "confirmation", version, kind)
        case refusal:
            return _stopped(args, refusal, "confirmation", version, kind)


# -- asking -----------------------------------------------------------------------------------


def confirm_message(plan: ReleasePlan, notes_digest: str, *, linked: bool = False) -> str:
    """The final question. Its first three lines decide the yes (a host may show no more,
    each cut at the terminal's width: Claude Code shows 3): the release, what it writes, and
    what the notes hold, counted; then the notes themselves. `linked`: the notes are also a
    page the question before this one links to. The confirm key carries the same digest."""
    lines = plan.notes_markdown.rstrip().splitlines()
    where = "at the link and below" if linked else "below"
    return "\n".join(
        [
            f"Release {plan.project} {plan.version} ({plan.kind}) with these notes?",
            f"Sets the version, adds the notes to CHANGELOG.md, pushes tag {plan.tag}",
            f"Notes: {notes_outline(plan.notes_markdown)}",
            f"The notes ({len(lines)} lines, sha256 {notes_digest}) are {where}; a yes is "
            "for exactly these.",
            "",
            *lines,
        ]
    )


def _ask_release(args: PlanReleaseArgs, hint: Suggestion, why: str | None = None) -> InputRequest:
    lines = [why] if why else []
    lines.append(f"Which version of {args.project} are you releasing?")
    if args.previous_version:
        lines.append(f"The last release was {args.previous_version}.")
    lines.append(f"Suggested: {hint.version} ({hint.kind}), because {hint.reason}.")
    return elicit_form(" ".join(lines), VersionForm)


def _ask_highlights(
    args: PlanReleaseArgs, version: Version, kind: Kind, why: str | None = None
) -> InputRequest:
    lines = [why] if why else []
    lines.append(f"What are the highlights of {args.project} {version}, a {kind} release?")
    lines.append("Separate several with ';'.")
    if found := notable(args.changes):
        lines.append(f"From the changes: {'; '.join(found[:5])}.")
    return elicit_form(" ".join(lines), HighlightsForm)


def _ask_migration(args: PlanReleaseArgs, version: Version, why: str | None = None) -> InputRequest:
    question = (
        f"{args.project} {version} is a major release: what breaks, and how do users upgrade?"
    )
    return elicit_form(f"{why} {question}" if why else question, MigrationForm)


def _ask_draft(args: PlanReleaseArgs, hint: Suggestion) -> InputRequest:
    changes = "\n".join(f"- {change}" for change in args.changes) or "- (no list of changes given)"
    prompt = (
        f"Write the highlights of {args.project} {hint.version}, a {hint.kind} "
        f"release, for its release notes. The changes since the last release:\n{changes}\n\n"
        "Answer with one to five highlights, one per line, each under 100 characters, "
        "written for users, with no preamble."
    )
    return sample(prompt, max_tokens=400, system_prompt="You write short, factual release notes.")


# -- results ----------------------------------------------------------------------------------


def _answered(plan: ReleasePlan) -> ToolResult:
    text = summary(plan)
    plan.message = text.split("\n\n", 1)[0]  # the first paragraph: the sentence
    return ToolResult.of(text, structured=plan)


def _drafted(args: PlanReleaseArgs, hint: Suggestion, draft: SamplingResult | None) -> ToolResult:
    highlights = split_highlights(draft.text) if draft is not None else []
    assumptions = [f"Version {hint.version} ({hint.kind}): {hint.reason}."]
    if draft is not None and highlights:
        model = f" ({draft.model})" if draft.model else ""
        assumptions.append(f"The highlights were drafted by the host's model{model}; review them.")
    else:
        if draft is not None:
            assumptions.append("The host's model gave no usable highlights.")
        highlights = notable(args.changes)[:5]
        assumptions.append(
            "The highlights are the notable changes as given."
            if highlights
            else "No notable changes were given, so there are no highlights."
        )
    assumptions.append("Nobody confirmed this plan: the host cannot show forms (elicitation).")
    plan = make_plan(
        args.project, args.changes, "drafted", hint.version, hint.kind, highlights, None
    )
    plan.assumptions = assumptions
    return _answered(plan)


def _stopped(
    args: PlanReleaseArgs,
    refusal: Declined | Cancelled,
    step: Step,
    version: Version | None = None,
    kind: Kind | None = None,
) -> ToolResult:
    # client/elicitation: servers "MUST handle cases where the user declines or cancels". Both
    # are answers, not failures, so the result is an ordinary one that says what happened.
    plan = ReleasePlan(
        status="declined" if isinstance(refusal, Declined) else "cancelled",
        project=args.project,
        version=str(version) if version is not None else None,
        kind=kind,
        stopped_at=step,
    )
    return _answered(plan)
