"""release_announcement: a prompt that asks who a release announcement is for before writing it.

`prompts/get` may answer with `input_required` just like `tools/call` (2026-07-28
basic/patterns/mrtr "Supported Requests": prompts/get, resources/read and tools/call), so a
prompt can ask for the context it needs. Without forms, or when the user declines, it falls
back to stated defaults: a prompt is a template, and a sensible template beats none.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..mrtr_runtime import Accepted, Context, InputRequired, elicit_form
from . import registry

__all__ = ("AnnouncementArgs", "release_announcement")

Audience = Literal["users", "developers", "operators"]
Channel = Literal["blog post", "mailing list", "social media", "chat"]

CONTEXT: Final = "context"
DEFAULT_AUDIENCE: Final[Audience] = "users"
DEFAULT_CHANNEL: Final[Channel] = "blog post"

_READERS: Final[dict[Audience, str]] = {
    "users": "the people who use it, in plain words without jargon",
    "developers": "developers who build on it; name API changes precisely",
    "operators": "the people who run it; spell out upgrade and configuration steps",
}
_SHAPES: Final[dict[Channel, str]] = {
    "blog post": "a blog post: a headline, then a few short paragraphs",
    "mailing list": "a plain-text email: a subject line, then a short body",
    "social media": "a social media post of at most 280 characters",
    "chat": "a chat message of two or three sentences",
}


class AnnouncementArgs(BaseModel):
    # server/prompts: prompt arguments are strings.
    model_config = ConfigDict(extra="forbid")

    project: str = Field(min_length=1, max_length=100, description="The project's name")
    version: str = Field(min_length=1, max_length=64, description="The version being announced")
    highlights: str = Field(
        default="", max_length=2000, description="What is new, in a few words (optional)"
    )


class AudienceForm(BaseModel):
    audience: Audience = Field(title="Who reads it")
    channel: Channel = Field(title="Where it is posted")


@registry.prompt(title="Announce a release")
async def release_announcement(args: AnnouncementArgs, *, ctx: Context) -> str | InputRequired:
    """Write the announcement of a release; first asks who reads it and where it is posted."""
    ask = elicit_form(
        f"Who is the announcement of {args.project} {args.version} for, and where will it go?",
        AudienceForm,
    )
    answer = ctx.form_answer(CONTEXT, AudienceForm)
    # As in plan_release: an answer, once given, decides; capabilities only decide whether to ask.
    if answer is None and ctx.can_request(ask):
        return ctx.request_input({CONTEXT: ask})
    match answer:
        case Accepted(content=form):
            audience, channel, assumed = form.audience, form.channel, ""
        case _:
            # No forms, a decline or a cancel (client/elicitation: servers "MUST handle" them):
            # use the defaults and say so, so the model does not pretend the user chose them.
            audience, channel = DEFAULT_AUDIENCE, DEFAULT_CHANNEL
            assumed = " The reader and the channel were not chosen; these are the defaults."
    highlights = (
        f"What is new: {args.highlights.strip()}"
        if args.highlights.strip()
        else "Ask me what is new before you write, unless the conversation already says."
    )
    return (
        f"Write the announcement of {args.project} {args.version}.\n"
        f"Readers: {_READERS[audience]}.\n"
        f"Form: {_SHAPES[channel]}.{assumed}\n"
        f"{highlights}\n"
        "Announce only what is listed; do not invent features, numbers or dates."
    )
