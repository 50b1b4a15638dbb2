"""deploy_to_aws: two questions in one round, then deploy exactly what the user confirmed.

The pattern to copy for a tool with a real effect. Round 1 asks two things at once: confirm,
and which IAM role to assume. A role ARN that fails its check is asked again on its own, with
the reason; a decline, a cancel or a "no" ends the call before anything touches AWS. Each
round signs a digest of the plan (stack, template, parameters) into its state, and the deploy
runs only while the plan is still the one the user confirmed: if the template file changed
between rounds, the confirmation is asked again.

The arguments and the answers decide everything the deploy does, so a retried round (same
requestState, same answers) finds the stack as it left it and reports "already up to date".
The CloudFormation change-set engine is `_cloudformation.py` beside this module; boto3 (the
project's `aws` extra) is imported on the first call, in a worker thread.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
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
    ToolResult,
    elicit_form,
)
from . import registry
from ._cloudformation import StackPlan, load_template, require_boto3, role_arn_problem, run_deploy

__all__ = ("ConfirmForm", "DeployArgs", "DeployResult", "RoleArnForm", "deploy_to_aws", "digest")

# -- what the user is asked: two keys, one round -----------------------------------------------

CONFIRM: Final = "confirm"
ROLE_ARN: Final = "role-arn"
ROLE_ARN_MESSAGE: Final = "Provide the IAM role ARN to assume:"


class ConfirmForm(BaseModel):
    confirmed: bool


class RoleArnForm(BaseModel):
    # What the client's form checks as the user types. It admits only the `aws` partition;
    # the tool also accepts aws-cn and aws-us-gov (role_arn_problem), re-checking every answer.
    arn: str = Field(pattern="^arn:aws:iam::")


class _RoleArnAnswer(BaseModel):
    # Read without the pattern: an ARN the form would refuse gets re-asked with a reason,
    # rather than read as no answer at all.
    arn: str


def _confirm_request(stack: str, why: str | None = None) -> InputRequest:
    message = f"Deploy stack '{stack}' to AWS production?"
    return elicit_form(message if why is None else f"{why} {message}", ConfirmForm)


def _role_request(why: str | None = None) -> InputRequest:
    message = ROLE_ARN_MESSAGE
    if why is not None:
        message = f"That is not an IAM role ARN: {why}. {ROLE_ARN_MESSAGE}"
    return elicit_form(message, RoleArnForm)


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
    action: Literal["created", "updated", "unchanged", "cancelled"]
    stack: str
    region: str | None = None
    stack_id: str | None = None
    status: str | None = None
    change_set: str | None = None
    outputs: dict[str, str] = Field(default_factory=dict)


def digest(plan: StackPlan) -> str:
    """What a confirmation is bound to: 16 hex of sha256 over everything the deploy would do."""
    material = [plan.stack, plan.template_body, sorted(plan.parameters.items()), plan.capabilities]
    encoded = json.dumps(material, separators=(",", ":"), ensure_ascii=False).encode()
    return hashlib.sha256(encoded).hexdigest()[:16]


def _summarized(outcome: DeployResult) -> ToolResult:
    if outcome.action == "cancelled":
        return ToolResult.of("Deploy cancelled by user.", structured=outcome)
    stack, region, status = outcome.stack, outcome.region, outcome.status
    if outcome.action == "unchanged":
        text = f"Stack '{stack}' in {region} is already up to date ({status}); nothing "
        text += "was deployed."
    else:
        text = f"{outcome.action.capitalize()} stack '{stack}' in {region}: {status}."
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
)
async def deploy_to_aws(args: DeployArgs, *, ctx: Context) -> ToolResult | InputRequired:
    """Create or update an AWS CloudFormation stack from a template shipped with this server.

    First asks the user to confirm and for the IAM role to assume, then deploys through a
    change set and reports what happened (created, updated, or already up to date) with the
    stack's outputs. Calling again with the same arguments changes nothing.
    """
    template_body = await anyio.to_thread.run_sync(load_template, args.template)
    await anyio.to_thread.run_sync(require_boto3)  # fail before asking anything of the user
    plan = StackPlan(args.stack, template_body, dict(args.parameters), tuple(args.capabilities))
    cancelled = DeployResult(action="cancelled", stack=args.stack, region=args.region)

    asks: dict[str, InputRequest] = {}
    match ctx.form_answer(CONFIRM, ConfirmForm):
        case None:
            asks[CONFIRM] = _confirm_request(args.stack)
        case Accepted(content=ConfirmForm(confirmed=True)) if ctx.state != digest(plan):
            # The yes was given to another plan (the template changed since): ask again.
            why = "The stack's template changed after you confirmed."
            asks[CONFIRM] = _confirm_request(args.stack, why)
        case Accepted(content=ConfirmForm(confirmed=True)):
            pass
        case _:  # declined, dismissed, or "no": nothing has touched AWS, and nothing will
            return _summarized(cancelled)
    arn: str | None = None
    match ctx.form_answer(ROLE_ARN, _RoleArnAnswer):
        case None:
            asks[ROLE_ARN] = _role_request()
        case Accepted(content=answer) if (problem := role_arn_problem(answer.arn)) is not None:
            asks[ROLE_ARN] = _role_request(problem)  # re-ask only this one, saying why
        case Accepted(content=answer):
            arn = answer.arn
        case _:
            return _summarized(cancelled)
    if asks or arn is None:
        # The state is what the confirm question was (or is being) answered for.
        return ctx.request_input(asks, state=digest(plan))

    counter = itertools.count(1)

    def relay(message: str) -> None:
        # Called in the worker thread; the notification is sent from the event loop.
        anyio.from_thread.run(
            functools.partial(ctx.report_progress, next(counter), message=message)
        )

    region, outcome = await anyio.to_thread.run_sync(
        functools.partial(
            run_deploy,
            plan,
            role_arn=arn,
            region=args.region,
            progress=relay,
            # basic/utilities/cancellation: a cancel stops the deploy before its next AWS write,
            # up to the change set's execution; from there it runs to its end, so what the
            # client is told matches what the stack did.
            checkpoint=ctx.check_cancelled,
            commit=ctx.point_of_no_return,
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
    )
    return _summarized(result)
