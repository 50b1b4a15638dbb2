"""deploy_to_aws: ask for the role, show the resolved plan, and deploy exactly what was confirmed.

The pattern to copy for a tool with a real, long effect. Round 1 asks which IAM role to
assume; an ARN that fails its check is asked again, with the reason. Round 2 shows the plan as
the deploy would run it. Hosts show only the first lines of a question (Claude Code shows 3,
then "+N more lines"), so what decides a yes is in those three: create or update, which stack,
account, region and role; what is dangerous (IAM capabilities, resources deleted, replaced or
changed); the values that differ from the defaults (or from the stack's). The lines after
them give the whole plan: the full role ARN, the stack as it is now, the template, every
parameter's value (NoEcho ones masked) and every resource. The yes is bound to all of it:
the round signs a digest of the plan (role and region included) and the stack's observed
version into its state, so a changed template, or a stack someone changed in between, is shown
and confirmed again, even by a server that keeps nothing between rounds. A decline, a cancel or
a "no" ends the call before anything is written to AWS, and a cancel of the task before its
change set is executed takes that change set back (and the empty stack a create made for it).

After the yes the deploy runs as an MCP task (`task="optional"`, `ctx.start_task`): a client
that declares the tasks extension gets the task at once and follows it; its progress is the
task's status message, and the result below is the task's result. A client without the
extension gets the same result inline, as the answer to the confirming round. The runtime
records that round's run once, keyed by its token: replaying it, byte for byte, returns that
run's task or result and deploys nothing.

Everything the deploy does is decided by the arguments and the answers (the change set is
named after their digest), so a run that resumes, or a new call with the same arguments, finds
the stack as it left it and reports "already up to date". The CloudFormation engine is
`_cloudformation.py` beside this module; boto3 (the project's `aws` extra) is imported on the
first call, in a worker thread.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
from collections.abc import Sequence
from typing import Annotated, Final, Literal

import anyio.from_thread
import anyio.to_thread
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from ..mrtr_runtime import (
    Accepted,
    Context,
    InputRequest,
    InputRequired,
    ToolAnnotations,
    ToolError,
    ToolResult,
    elicit_form,
)
from . import registry
from ._cloudformation import (
    ABSENT,
    PlanView,
    ShownParameter,
    StackPlan,
    inspect_plan,
    load_template,
    require_boto3,
    resolve_region,
    role_arn_problem,
    run_deploy,
)
from ._stack_changes import ResourceChanges

__all__ = ("ConfirmForm", "DeployArgs", "DeployResult", "RoleArnForm", "deploy_to_aws", "digest")

# -- what the user is asked: the role, then a yes to the plan ------------------------------------

CONFIRM: Final = "confirm"
ROLE_ARN: Final = "role-arn"
ROLE_ARN_MESSAGE: Final = "Which IAM role should the deploy assume? Give its ARN."


class ConfirmForm(BaseModel):
    # Hosts show a field's title (else its raw name) and may show its description.
    confirmed: bool = Field(
        title="Deploy this plan",
        description="Yes deploys exactly what is shown above; no changes nothing in AWS.",
    )


class RoleArnForm(BaseModel):
    # What the client's form checks as the user types. It admits only the `aws` partition;
    # the tool also accepts aws-cn and aws-us-gov (role_arn_problem), re-checking every answer.
    arn: str = Field(
        pattern="^arn:aws:iam::",
        title="IAM role ARN",
        description="The role to assume: arn:aws:iam::<account>:role/<name>",
    )


class _RoleArnAnswer(BaseModel):
    # Read without the pattern: an ARN the form would refuse gets re-asked with a reason,
    # rather than read as no answer at all.
    arn: str


def _role_request(why: str | None = None) -> InputRequest:
    message = ROLE_ARN_MESSAGE
    if why is not None:
        message = f"That is not an IAM role ARN: {why}. {ROLE_ARN_MESSAGE}"
    return elicit_form(message, RoleArnForm)


def _stack_line(version: str) -> str:
    if version == ABSENT:
        return "Stack now: none, so this creates it"
    status, _, changed = version.partition(" ")
    return f"Stack now: {status}, last changed {changed}"


#: What a host shows of a question: Claude Code shows its first 3 lines, each cut at the
#: terminal's width ("…"), then "(+N more lines)". So the first three lines decide the yes,
#: and each is written to fit 74 characters (an 80-column terminal) for a typical plan, the
#: most important words first; counts come before the names they count.
SHOWN_LINES: Final = 3
SHOWN_WIDTH: Final = 74
_CAPABILITY_WORDS: Final = {
    "CAPABILITY_IAM": "May change IAM",
    "CAPABILITY_NAMED_IAM": "May change IAM",
    "CAPABILITY_AUTO_EXPAND": "Runs macros",
}


def _value(item: ShownParameter) -> str:
    # JSON-quoted, so no value (a parameter can hold a newline) can forge a line.
    if item.secret:
        return f"{item.key}={item.shown} (NoEcho)"
    return f"{item.key}={json.dumps(item.shown)}"


def _counted(verb: str, names: Sequence[str]) -> str:
    return f"{verb} {len(names)}: {', '.join(names)}"


def _danger_line(view: PlanView, args: DeployArgs) -> str:
    """Line 2: what is dangerous, most dangerous first: resources deleted or replaced, IAM
    capabilities and macros, then what is changed or added."""
    granted = [f"{_CAPABILITY_WORDS[name]} ({name})" for name in args.capabilities]
    parts: list[str] = []
    changes = view.resources
    if isinstance(changes, str):
        parts.append(f"Resources {changes}")
    elif not view.creates:
        if changes.deleted:
            parts.append(_counted("DELETES", [key for key, _ in changes.deleted]))
        if changes.replaced:
            parts.append(_counted("REPLACES", [key for key, *_ in changes.replaced]))
    parts.append(", ".join(granted) if granted else "No IAM capabilities")
    if isinstance(changes, ResourceChanges):
        if view.creates:
            parts.append(_counted("Creates", [key for key, _ in changes.added]))
        else:
            if changes.changed:
                parts.append(_counted("Changes", [key for key, _ in changes.changed]))
            if changes.added:
                parts.append(_counted("Adds", [key for key, _ in changes.added]))
            if changes.empty:
                parts.append("Template unchanged")
    return ". ".join(parts)


def _values_line(view: PlanView) -> str:
    """Line 3: the values worth reading: those that differ from the template's defaults (a
    new stack) or from what the stack has now (an update)."""
    changed = [
        _value(item)
        if item.was is None or item.secret
        else f"{_value(item)} (was {json.dumps(item.was)})"
        for item in view.parameters
        if item.changes
    ]
    if changed:
        return "Set: " + ", ".join(changed)
    if view.creates:
        return "Set: every parameter at its template default"
    return "Set: no parameter changes"


def _resources_lines(view: PlanView) -> list[str]:
    changes = view.resources
    if isinstance(changes, str):
        return [f"Resources: {changes}"]
    listed = [
        ("To delete", [f"{key} ({kind})" for key, kind in changes.deleted]),
        ("To replace", [f"{key} ({old} -> {new})" for key, old, new in changes.replaced]),
        (
            "To change",
            [
                f"{key} ({kind}; in place, or replaced where CloudFormation must)"
                for key, kind in changes.changed
            ],
        ),
        (
            "To create" if view.creates else "To add",
            [f"{key} ({kind})" for key, kind in changes.added],
        ),
    ]
    return [f"{label}: {', '.join(items)}" for label, items in listed if items]


def confirm_message(args: DeployArgs, view: PlanView, template_body: str, why: str = "") -> str:
    """The confirmation. Its first three lines decide the yes (SHOWN_LINES: a host may show no
    more): what and where; what is dangerous; which values are not the defaults (or not the
    stack's). The lines after them are the whole plan, one fact per line. `why`: what changed
    since an earlier yes, for a question asked again."""
    verb = "create" if view.creates else "update"
    if why:  # shorter, so that the account and region still fit
        first = f"Changed since your yes: {verb} '{args.stack}' in {view.account}, {view.region}?"
    else:
        first = (
            f"{verb.capitalize()} stack '{args.stack}' in account {view.account}, {view.region}?"
        )
    template_hash = hashlib.sha256(template_body.encode()).hexdigest()[:12]
    parameters = ", ".join(
        _value(item) + (" (default)" if item.default else "") for item in view.parameters
    )
    return "\n".join(
        [
            first,
            _danger_line(view, args),
            _values_line(view),
            *([f"Why again: {why}"] if why else []),
            f"Account {view.account}, region {view.region}, role {view.role_arn}",
            _stack_line(view.stack_version),
            f"Template: {args.template} (sha256 {template_hash})",
            f"Capabilities: {', '.join(args.capabilities) or 'none'}",
            f"Parameters: {parameters or 'none'}",
            *_resources_lines(view),
        ]
    )


def _still_holds(confirmed: object, now: dict[str, str], view: PlanView) -> bool:
    return isinstance(confirmed, dict) and confirmed.get("plan") == now["plan"] and view.matches


def _why_again(confirmed: object, now: dict[str, str]) -> str:
    """What changed since the yes, for a confirmation asked again."""
    before = confirmed if isinstance(confirmed, dict) else {}
    if before.get("plan") != now["plan"]:
        return "The plan changed after you confirmed (its template or the server's region)."
    old = str(before.get("stack", ""))
    was = "did not exist" if old == ABSENT else f"was {old.partition(' ')[0]}"
    return f"The stack changed after you confirmed (it {was}); check the plan again."


# -- arguments and result ----------------------------------------------------------------------

# CloudFormation CreateStack: StackName "[a-zA-Z][-a-zA-Z0-9]*", at most 128 characters.
_STACK_NAME: Final = r"^[A-Za-z][A-Za-z0-9-]{0,127}$"
_REGION: Final = r"^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$"
# CloudFormation Parameter logical IDs are alphanumeric.
ParameterKey = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9]{1,255}$")]
ParameterValue = Annotated[str, StringConstraints(max_length=4096)]
Capability = Literal["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"]


class DeployArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    stack: str = Field(pattern=_STACK_NAME, description="CloudFormation stack name, e.g. prod-api.")
    region: str | None = Field(
        default=None,
        pattern=_REGION,
        description="AWS region. Default: AWS_REGION, then AWS_DEFAULT_REGION, then the profile's.",
    )
    template: str = Field(
        default="stack.yaml",
        description="File name of a template in the server's tools/cloudformation directory.",
    )
    parameters: dict[ParameterKey, ParameterValue] = Field(
        default_factory=dict,
        max_length=200,
        description=(
            "Template parameter values. A parameter left out takes the template's default, "
            "not the stack's previous value: the arguments alone decide what is deployed."
        ),
    )
    capabilities: list[Capability] = Field(
        default_factory=list,
        description="Acknowledge templates that create IAM resources or use macros.",
    )


class DeployResult(BaseModel):
    # A host may hand its model this object rather than the text (Claude Code does), so it
    # carries the sentence a person would read, and leaves out what does not apply (the
    # runtime drops optional fields left at None) rather than saying null.
    message: str = Field(default="", description="What happened, as a sentence.")
    action: Literal["created", "updated", "unchanged", "cancelled"]
    stack: str
    region: str | None = None
    stack_id: str | None = None
    status: str | None = None
    change_set: str | None = None
    outputs: dict[str, str] = Field(default_factory=dict)
    #: Carried out by this task's earlier run, which stopped with the server past its change
    #: set's execution; this run found it done and deployed nothing more.
    by_earlier_run: bool = False


def digest(plan: StackPlan, *, role_arn: str, region: str) -> str:
    """What a confirmation is bound to: 16 hex of sha256 over everything the deploy would do,
    as whom and where."""
    material = [
        plan.stack,
        plan.template_body,
        sorted(plan.parameters.items()),
        plan.capabilities,
        role_arn,
        region,
    ]
    encoded = json.dumps(material, separators=(",", ":"), ensure_ascii=False).encode()
    return hashlib.sha256(encoded).hexdigest()[:16]


def _summarized(outcome: DeployResult) -> ToolResult:
    stack, region, status = outcome.stack, outcome.region, outcome.status
    if outcome.action == "cancelled":
        text = f"Deploy of stack '{stack}' cancelled by the user; nothing was written to AWS."
        return ToolResult.of(text, structured=outcome.model_copy(update={"message": text}))
    if outcome.action == "unchanged":
        text = f"Stack '{stack}' in {region} is already up to date ({status}); nothing "
        text += "was deployed."
    else:
        text = f"{outcome.action.capitalize()} stack '{stack}' in {region}: {status}."
    if outcome.by_earlier_run:
        text += (
            " This task's earlier run did it before the server stopped; the resumed run found "
            "it done and deployed nothing more."
        )
    outcome = outcome.model_copy(update={"message": text})
    text += f"\nStack ID: {outcome.stack_id}\nChange set: {outcome.change_set}"
    if outcome.outputs:
        outputs = sorted(outcome.outputs.items())
        text += "\nOutputs:" + "".join(f"\n  {key} = {value}" for key, value in outputs)
    return ToolResult.of(text, structured=outcome)


# -- the handler ---------------------------------------------------------------------------------


@registry.tool(
    title="Deploy a CloudFormation stack",
    annotations=ToolAnnotations(
        title="Deploy a CloudFormation stack",
        read_only=False,
        destructive=True,  # an update may replace or delete resources
        idempotent=True,  # the same arguments and answers deploy once, then report "up to date"
        open_world=True,  # it talks to AWS
    ),
    output_model=DeployResult,
    task="optional",  # the deploy takes minutes: a client that can follow a task gets one
    # Over HTTP with OAuth (docs/oauth.md), only tokens granted this scope may deploy.
    scopes=["deploy"],
)
async def deploy_to_aws(args: DeployArgs, *, ctx: Context) -> ToolResult | InputRequired:
    """Create or update an AWS CloudFormation stack from a template shipped with this server.

    Asks the user for the IAM role to assume, then shows the resolved plan (account, region,
    stack, template, capabilities, every parameter) for a yes, then deploys through a change
    set and reports what happened (created, updated, or already up to date) with the stack's
    outputs. Runs as a task for clients that support tasks. Calling again with the same
    arguments changes nothing.
    """
    template_body = await anyio.to_thread.run_sync(load_template, args.template)
    await anyio.to_thread.run_sync(require_boto3)  # fail before asking anything of the user
    plan = StackPlan(args.stack, template_body, dict(args.parameters), tuple(args.capabilities))
    cancelled = DeployResult(action="cancelled", stack=args.stack, region=args.region)

    # Round 1: the role. It comes first because the confirmation shows what it implies.
    match ctx.form_answer(ROLE_ARN, _RoleArnAnswer):
        case None:
            return ctx.request_input({ROLE_ARN: _role_request()})
        case Accepted(content=answer) if (problem := role_arn_problem(answer.arn)) is not None:
            return ctx.request_input({ROLE_ARN: _role_request(problem)})  # again, saying why
        case Accepted(content=answer):
            arn = answer.arn
        case _:  # declined or dismissed: nothing has touched AWS, and nothing will
            return _summarized(cancelled)

    # Round 2: a yes to the plan as it would run, bound to it and to the stack as it was seen.
    confirm = ctx.form_answer(CONFIRM, ConfirmForm)
    match confirm:
        case None | Accepted(content=ConfirmForm(confirmed=True)):
            pass
        case _:  # declined, dismissed, or "no": nothing has been written to AWS
            return _summarized(cancelled)
    region = await anyio.to_thread.run_sync(resolve_region, args.region)
    plan_digest = digest(plan, role_arn=arn, region=region)
    if not ctx.in_task:
        view = await anyio.to_thread.run_sync(
            functools.partial(inspect_plan, plan, role_arn=arn, region=region)
        )
        binding = {"plan": plan_digest, "stack": view.stack_version}
        # The yes holds while the stack is as the user saw it, or already is this very plan
        # (this confirmation's own deploy, done or under way: running it again changes
        # nothing). A stack changed in any other way, by a later deploy say, is asked again.
        holds = ctx.state == binding or _still_holds(ctx.state, binding, view)
        if confirm is None or not holds:
            why = _why_again(ctx.state, binding) if confirm is not None else ""
            message = confirm_message(args, view, template_body, why)
            return ctx.request_input({CONFIRM: elicit_form(message, ConfirmForm)}, state=binding)
        # Everything is asked and answered: from here the work is long. A client that follows
        # tasks gets the task now; the runtime re-runs this handler in the task (in_task).
        ctx.start_task(f"Deploying stack '{args.stack}' to AWS account {view.account}, {region}")
    elif not isinstance(ctx.state, dict) or ctx.state.get("plan") != plan_digest:
        # In the task (a run resumed after a restart, too) the stack may already show this
        # very deploy, so only the plan is compared: a template changed since the yes stops it.
        raise ToolError(
            f"The plan for stack '{args.stack}' changed after it was confirmed (its template or "
            "the server's region); nothing was deployed. Call deploy_to_aws again to confirm it."
        )

    counter = itertools.count(1)

    def relay(message: str) -> None:
        # Called in the worker thread; sent from the event loop (in a task: its statusMessage).
        anyio.from_thread.run(
            functools.partial(ctx.report_progress, next(counter), message=message)
        )

    region, outcome = await anyio.to_thread.run_sync(
        functools.partial(
            run_deploy,
            plan,
            role_arn=arn,
            region=region,
            progress=relay,
            # basic/utilities/cancellation (and tasks/cancel): a cancel stops the deploy before
            # its next AWS write, up to the change set's execution; from there it runs to its
            # end, so what the client is told matches what the stack did.
            checkpoint=ctx.check_cancelled,
            commit=ctx.point_of_no_return,
            resumed=ctx.resumed,
        )
    )
    ctx.log.info(
        "deploy_to_aws: stack %s in %s %s (%s)", args.stack, region, outcome.action, outcome.status
    )
    result = DeployResult(
        action=outcome.action,
        stack=args.stack,
        region=region,
        stack_id=outcome.stack_id,
        status=outcome.status,
        change_set=outcome.change_set,
        outputs=dict(outcome.outputs),
        by_earlier_run=outcome.by_earlier_run,
    )
    return _summarized(result)
