"""Maintained by the mrtr-server template (`cruft update` brings its fixes): the CloudFormation
change-set engine behind `deploy_to_aws`, plain functions over boto3.

Private to the tool (the leading underscore keeps `Registry.load_package` from loading it as a
tool module). Everything here blocks, so the tool runs it in a worker thread; it is tested on
its own against moto and botocore's Stubber. `deploy_stack` makes one stack match one
`StackPlan`, the way awscli's `cloudformation deploy` does, and `run_deploy` assumes the
user's role first. `inspect_plan` reads what a confirmation shows before anything is written:
every parameter's value (NoEcho ones masked, the stack's current one beside it), the stack's
version and what happens to its resources (`_stack_changes.py`). boto3 is optional (the
project's `aws` extra): it is imported on first use.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import hashlib
import importlib
import importlib.metadata
import json
import logging
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar

from ..mrtr_runtime import RequestCancelled, ToolError, redact_secrets, treat_as_secret
from ._stack_changes import ResourceChanges, resource_changes, template_resources

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

__all__ = (
    "ABSENT",
    "MASK",
    "TEMPLATE_BODY_LIMIT",
    "TEMPLATE_DIR",
    "AwsCredentials",
    "Checkpoint",
    "DeployOutcome",
    "PlanView",
    "Progress",
    "ShownParameter",
    "StackPlan",
    "WaitPolicy",
    "assume_role",
    "change_set_name",
    "deploy_stack",
    "inspect_plan",
    "load_template",
    "require_boto3",
    "resolve_region",
    "role_arn_problem",
    "run_deploy",
    "stack_version",
)

#: CloudFormation quota: a TemplateBody of at most 51,200 bytes (larger ones go through S3).
TEMPLATE_BODY_LIMIT: Final = 51_200
#: STS AssumeRole minimum; every wait below fits inside it (WaitPolicy.budget_seconds).
SESSION_SECONDS: Final = 900
TEMPLATE_DIR: Traversable = resources.files(__name__.rpartition(".")[0]).joinpath("cloudformation")
# Only a file name: no separators, no "..", so a caller cannot read outside the directory.
_TEMPLATE_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,99}\.(yaml|yml|json)")

_SUCCEEDED: Final = frozenset({"CREATE_COMPLETE", "UPDATE_COMPLETE", "IMPORT_COMPLETE"})
_UPDATABLE: Final = _SUCCEEDED | {"UPDATE_ROLLBACK_COMPLETE", "IMPORT_ROLLBACK_COMPLETE"}
# A create that failed leaves ROLLBACK_COMPLETE: nothing left to update, only to delete.
_FAILED_CREATE: Final = "ROLLBACK_COMPLETE"
_REVIEW: Final = "REVIEW_IN_PROGRESS"
# AWS marks an empty change set FAILED with the first reason; moto (and UpdateStack) raise
# ValidationError with the second. Both mean "already deployed".
_NO_CHANGES: Final = ("didn't contain changes", "No updates are to be performed")
_ROLE_ARN: Final = re.compile(
    r"arn:(aws|aws-cn|aws-us-gov):iam::[0-9]{12}:role/"
    r"([\x21-\x2e\x30-\x7e]+/)*"  # optional path: printable ASCII segments
    r"[\w+=,.@-]{1,64}",  # IAM role name
    re.ASCII,
)

#: What a confirmation shows for a NoEcho parameter, and what `describe_stacks` reads back.
MASK: Final = "****"
#: The version of a stack that does not exist (yet, or any more).
ABSENT: Final = "absent"

T = TypeVar("T")
_logger: Final = logging.getLogger(__name__)
Progress = Callable[[str], None]
#: Raises to stop a deploy between two AWS steps (the tool passes `ctx.check_cancelled`).
Checkpoint = Callable[[], None]
#: Called right before a call that changes the stack (the tool passes `ctx.point_of_no_return`):
#: it raises if the deploy was cancelled first, and once it returns the deploy is finished, not
#: abandoned, whatever a cancel says (its checkpoints stop raising).
PointOfNoReturn = Callable[[], None]


def _ignore_progress(message: str) -> None:
    del message


def _carry_on() -> None:
    return None


@dataclass(frozen=True)
class WaitPolicy:
    """How long and how often to poll. All waits of one deploy share one budget, which ends
    before the assumed role's 15-minute credentials do (boto3 waiters default to 30 s x 120)."""

    delay_seconds: float = 5.0
    budget_seconds: float = 780.0
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic


class _Deadline:
    def __init__(
        self,
        policy: WaitPolicy,
        checkpoint: Checkpoint = _carry_on,
        commit: PointOfNoReturn = _carry_on,
    ) -> None:
        self.policy = policy
        self.ends = policy.clock() + policy.budget_seconds
        #: Called before every poll and every AWS write, so a cancelled deploy stops there.
        self.checkpoint = checkpoint
        self.commit = commit

    def attempts(self) -> int:
        """Polls that fit: the first one now, then one per delay until the budget ends."""
        left = max(0.0, self.ends - self.policy.clock())
        return int(left // self.policy.delay_seconds) + 1

    def waiter_config(self) -> dict[str, int]:
        return {"Delay": max(1, round(self.policy.delay_seconds)), "MaxAttempts": self.attempts()}


def _keep_credentials_out_of_logs() -> None:
    # botocore's DEBUG lines quote signed request headers (X-Amz-Security-Token) and raw STS
    # responses (the assumed role's secret key), so here it never logs below INFO, whatever
    # MRTR_LOG_LEVEL says.
    for name in ("botocore", "boto3"):
        logger = logging.getLogger(name)
        if logger.getEffectiveLevel() < logging.INFO:
            logger.setLevel(logging.INFO)


@dataclass(frozen=True)
class StackPlan:
    """The whole desired state of one stack; equal plans are equal deploys."""

    stack: str
    template_body: str
    parameters: Mapping[str, str]
    capabilities: tuple[str, ...] = ()


@dataclass(frozen=True)
class DeployOutcome:
    action: Literal["created", "updated", "unchanged"]
    stack_id: str
    status: str
    change_set: str
    outputs: Mapping[str, str]
    #: The action was carried out by an earlier run of this same deploy (a task resumed after
    #: its server stopped past ExecuteChangeSet), which this run found done.
    by_earlier_run: bool = False


@dataclass(frozen=True)
class ShownParameter:
    """One template parameter as the deploy would send it, as a confirmation may show it."""

    key: str
    shown: str  # the value, or MASK for a NoEcho parameter
    default: bool  # taken from the template's Default, not from the arguments
    secret: bool  # NoEcho in the template
    #: The stack's value now (MASK for NoEcho), or None: no stack yet, or a new parameter.
    was: str | None = None

    @property
    def changes(self) -> bool:
        """Whether the deploy sets a value worth reading before a yes: one the stack does not
        have now, or (for a new stack) one that is not the template's default."""
        if self.was is not None:
            return self.secret or self.shown != self.was  # a NoEcho value cannot be compared
        return not self.default


@dataclass(frozen=True)
class PlanView:
    """What `deploy_stack(plan)` would do, read before anything is written (`inspect_plan`).

    `stack_version` is the stack's observed version: its status and last change, or ABSENT.
    A confirmation signs it beside the plan's digest, so a yes given before someone else
    changed the stack is asked again, even by a server that keeps nothing between rounds.
    """

    region: str
    account: str
    role_arn: str
    parameters: tuple[ShownParameter, ...]
    stack_version: str
    #: What happens to the stack's resources; a str says why that could not be read.
    resources: ResourceChanges | str = dataclasses.field(default_factory=ResourceChanges)
    #: The stack already is this plan, or this plan's change set is executing: deploying it
    #: again would change nothing, whoever changed the stack since it was seen.
    matches: bool = False

    @property
    def creates(self) -> bool:
        return self.stack_version == ABSENT or self.stack_version.startswith(_REVIEW + " ")


@dataclass(frozen=True)
class AwsCredentials:
    """Temporary credentials; repr() shows none of them, so a log line cannot leak them."""

    access_key_id: str
    secret_access_key: str
    session_token: str

    def __repr__(self) -> str:
        return "AwsCredentials(<redacted>)"

    def secrets(self) -> tuple[str, str, str]:
        return (self.access_key_id, self.secret_access_key, self.session_token)


@dataclass(frozen=True)
class _Stack:
    stack_id: str
    status: str
    last_changed: str
    parameters: Mapping[str, str]
    outputs: Mapping[str, str]

    @property
    def busy(self) -> bool:
        return self.status.endswith("_IN_PROGRESS") and self.status != _REVIEW


def stack_version(stack: _Stack | None) -> str:
    """`"<status> <last change>"`, or ABSENT: what changes whenever anyone changes the stack."""
    return ABSENT if stack is None else f"{stack.status} {stack.last_changed}"


@functools.cache
def _botocore_exceptions() -> Any:
    # Only reached once a boto3 call has run (or raised), so botocore is already imported.
    return importlib.import_module("botocore.exceptions")


def _error_of(error: Exception) -> tuple[str, str]:
    details = getattr(error, "response", {}).get("Error", {})
    return str(details.get("Code", "Unknown")), str(details.get("Message", ""))


def _is_no_changes(message: str | None) -> bool:
    return message is not None and any(marker in message for marker in _NO_CHANGES)


def _token(prefix: str, *parts: str) -> str:
    # ClientToken / ClientRequestToken: "[a-zA-Z0-9][-a-zA-Z0-9]*", at most 128 characters.
    return f"{prefix}-{hashlib.sha256(chr(31).join(parts).encode()).hexdigest()[:32]}"


def role_arn_problem(arn: str) -> str | None:
    """Why `arn` is not an IAM role ARN a deploy can assume, or None when it is one."""
    if len(arn) <= 2048 and _ROLE_ARN.fullmatch(arn):
        return None
    parts = arn.split(":", 5)
    if len(parts) != 6 or parts[0] != "arn":
        return "it is not an ARN (arn:<partition>:iam::<account-id>:role/<name>)"
    partition, service, region, account, resource = parts[1:]
    if partition not in ("aws", "aws-cn", "aws-us-gov"):
        return f"the partition must be aws, aws-cn or aws-us-gov, not {partition[:20]!r}"
    if service != "iam" or region:
        return "it is not an IAM ARN (arn:<partition>:iam::<account-id>:role/<name>)"
    if not re.fullmatch(r"[0-9]{12}", account):
        return "the account ID must be 12 digits"
    if not resource.startswith("role/"):
        return f"it names an IAM {resource.partition('/')[0][:20]!r}, not a role"
    return "the role name or path has characters IAM does not allow"


def change_set_name(
    template_body: str, parameters: Mapping[str, str], *, secret_keys: frozenset[str] = frozenset()
) -> str:
    """`mrtr-` + 12 hex of sha256 over the template and the sorted parameters.

    NoEcho values stay out of the digest: a change-set name is readable by anyone who may
    list change sets, and 48 bits of a hash would let them test guesses of a weak secret.
    """
    visible = sorted(
        (key, "" if key in secret_keys else value) for key, value in parameters.items()
    )
    material = json.dumps([template_body, visible], separators=(",", ":"), ensure_ascii=False)
    return f"mrtr-{hashlib.sha256(material.encode()).hexdigest()[:12]}"


def load_template(name: str) -> str:
    """The body of template `name` from TEMPLATE_DIR (shipped with the package)."""
    directory = TEMPLATE_DIR
    if not _TEMPLATE_NAME.fullmatch(name) or not directory.joinpath(name).is_file():
        known = sorted(
            item.name for item in directory.iterdir() if _TEMPLATE_NAME.fullmatch(item.name)
        )
        raise ToolError(
            f"No template named {name[:100]!r} in tools/cloudformation; available: "
            f"{', '.join(known) or 'none'}."
        )
    body = directory.joinpath(name).read_bytes()
    if len(body) > TEMPLATE_BODY_LIMIT:
        raise ToolError(
            f"Template {name!r} is {len(body)} bytes; CloudFormation takes at most "
            f"{TEMPLATE_BODY_LIMIT} bytes inline. Split it or deploy it from S3 yourself."
        )
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"Template {name!r} is not UTF-8 text.") from None


def assume_role(sts: Any, role_arn: str, *, session_name: str) -> AwsCredentials:
    """STS AssumeRole for the shortest session STS allows (900 s)."""
    response = sts.assume_role(
        RoleArn=role_arn, RoleSessionName=session_name, DurationSeconds=SESSION_SECONDS
    )
    credentials = response["Credentials"]
    return AwsCredentials(
        str(credentials["AccessKeyId"]),
        str(credentials["SecretAccessKey"]),
        str(credentials["SessionToken"]),
    )


def _describe_stack(cfn: Any, name_or_id: str) -> _Stack | None:
    try:
        stacks = cfn.describe_stacks(StackName=name_or_id)["Stacks"]
    except _botocore_exceptions().ClientError as error:
        code, message = _error_of(error)
        if code == "ValidationError" and "does not exist" in message:
            return None
        raise
    stack = stacks[0]
    changed = stack.get("LastUpdatedTime") or stack.get("CreationTime") or ""
    if isinstance(changed, datetime.datetime):  # botocore parses timestamps; stubs may not
        changed = changed.astimezone(datetime.UTC).isoformat().replace("+00:00", "Z")
    return _Stack(
        stack_id=str(stack["StackId"]),
        status=str(stack["StackStatus"]),
        last_changed=str(changed),
        parameters={
            str(item["ParameterKey"]): str(item.get("ParameterValue", ""))
            for item in stack.get("Parameters") or ()
        },
        outputs={
            str(item["OutputKey"]): str(item.get("OutputValue", ""))
            for item in stack.get("Outputs") or ()
        },
    )


def _resolve_parameters(cfn: Any, plan: StackPlan) -> tuple[dict[str, str], frozenset[str]]:
    """Every template parameter's value: the given one, else the template's default.

    Sending all of them makes the deploy independent of what the stack had before.
    """
    summary = cfn.get_template_summary(TemplateBody=plan.template_body)
    declared = {str(item["ParameterKey"]): item for item in summary.get("Parameters") or ()}
    unknown = sorted(set(plan.parameters) - set(declared))
    if unknown:
        raise ToolError(
            f"The template has no parameter {', '.join(unknown)}; "
            f"it declares: {', '.join(sorted(declared)) or 'none'}."
        )
    values: dict[str, str] = {}
    missing: list[str] = []
    for key, item in sorted(declared.items()):
        if key in plan.parameters:
            values[key] = plan.parameters[key]
        elif "DefaultValue" in item:
            values[key] = str(item["DefaultValue"])
        else:
            missing.append(key)
    if missing:
        raise ToolError(
            f"Template parameter(s) {', '.join(missing)} have no default; "
            "pass them in `parameters`."
        )
    secret = frozenset(key for key, item in declared.items() if item.get("NoEcho"))
    return values, secret


def _is_current(cfn: Any, stack: _Stack, body: str, parameters: Mapping[str, str]) -> bool:
    """Whether the stack already runs exactly this template with exactly these values."""
    if dict(stack.parameters) != dict(parameters):
        return False  # NoEcho values read back as "****", so those stacks go to a change set
    deployed = cfn.get_template(StackName=stack.stack_id, TemplateStage="Original")["TemplateBody"]
    if isinstance(deployed, str):
        return deployed == body
    try:  # botocore hands JSON templates back already parsed
        return bool(deployed == json.loads(body))
    except ValueError:
        return False


def _our_change_set(cfn: Any, stack: _Stack, name: str) -> dict[str, Any] | None:
    try:
        change_set: dict[str, Any] = cfn.describe_change_set(
            StackName=stack.stack_id, ChangeSetName=name
        )
    except _botocore_exceptions().ClientError as error:
        if _error_of(error)[0] in ("ChangeSetNotFound", "ValidationError"):
            return None
        raise
    # moto looks change-set names up across all stacks; AWS keeps them per stack.
    return change_set if change_set.get("StackId") == stack.stack_id else None


def _event_ids(cfn: Any, stack_id: str) -> set[str]:
    events = cfn.describe_stack_events(StackName=stack_id)["StackEvents"]
    return {str(event["EventId"]) for event in events}


def _relay_events(cfn: Any, stack_id: str, seen: set[str], progress: Progress) -> list[str]:
    """Send the stack events not seen yet, oldest first; returns the failure reasons among them.

    One page (newest first) per poll: a stack emitting more than a page between two polls
    loses the overflow from the progress stream, not from the outcome.
    """
    events = cfn.describe_stack_events(StackName=stack_id)["StackEvents"]
    fresh = [event for event in events if str(event["EventId"]) not in seen]
    failures: list[str] = []
    for event in reversed(fresh):
        seen.add(str(event["EventId"]))
        status = str(event.get("ResourceStatus", ""))
        reason = event.get("ResourceStatusReason")
        line = f"{event.get('LogicalResourceId')} ({event.get('ResourceType')}): {status}"
        progress(f"{line}: {reason}" if reason else line)
        if reason and status.endswith("FAILED"):
            failures.append(f"{event.get('LogicalResourceId')}: {reason}")
    return failures


def _wait_for_stack(
    cfn: Any,
    stack_id: str,
    seen: set[str],
    progress: Progress,
    deadline: _Deadline,
) -> _Stack:
    # Our own poll rather than a boto3 waiter: between polls the new events go out as progress.
    failures: list[str] = []
    status = "IN_PROGRESS"
    for attempt in range(deadline.attempts()):
        if attempt:
            deadline.policy.sleep(deadline.policy.delay_seconds)
        deadline.checkpoint()
        failures += _relay_events(cfn, stack_id, seen, progress)
        stack = _describe_stack(cfn, stack_id)
        if stack is None:  # only by name; a deleted stack is still found by its id
            raise ToolError(f"Stack {stack_id} disappeared while deploying.")
        status = stack.status
        if status.endswith("_IN_PROGRESS"):
            continue
        if status not in _SUCCEEDED:
            why = "; ".join(failures[:5]) or "no reason given in the stack events"
            raise ToolError(f"Deploying stack {stack_id} ended in {status}: {why}")
        return stack
    raise ToolError(
        f"Stack {stack_id} is still {status} after {deadline.policy.budget_seconds:.0f} s. "
        "The deploy goes on in AWS; call deploy_to_aws again with the same arguments to keep "
        "waiting."
    )


def _delete_failed_create(cfn: Any, stack: _Stack, progress: Progress, deadline: _Deadline) -> None:
    progress(f"Deleting the stack a failed create left in {_FAILED_CREATE}")
    deadline.checkpoint()
    deadline.commit()
    cfn.delete_stack(
        StackName=stack.stack_id, ClientRequestToken=_token("mrtr-delete", stack.stack_id)
    )
    try:
        cfn.get_waiter("stack_delete_complete").wait(
            StackName=stack.stack_id, WaiterConfig=deadline.waiter_config()
        )
    except _botocore_exceptions().WaiterError as error:
        raise ToolError(
            f"Could not delete the {_FAILED_CREATE} stack {stack.stack_id}: {error}"
        ) from None


def deploy_stack(
    cfn: Any,
    plan: StackPlan,
    *,
    progress: Progress = _ignore_progress,
    waits: WaitPolicy | None = None,
    checkpoint: Checkpoint = _carry_on,
    commit: PointOfNoReturn = _carry_on,
    resumed: bool = False,
) -> DeployOutcome:
    """Create or update `plan.stack` through a change set so that it matches `plan`, once.

    The flow of awscli's `cloudformation deploy`: a change set named after a digest of the
    plan, "no changes" counted as success, ClientToken/ClientRequestToken on every write so
    an AWS-side retry is recognised, and bounded waits. `checkpoint` runs before every AWS
    write: once it raises, no change set is created or executed. `commit` runs right before
    each call that changes the stack itself (DeleteStack, ExecuteChangeSet; a change set is
    only a proposal): the point past which the deploy may have happened. `resumed`: this run
    continues one that stopped (`ctx.resumed`); a stack this plan's own executed change set
    already made is then reported as that run's work, not as "unchanged".
    """
    deadline = _Deadline(waits or WaitPolicy(), checkpoint, commit)
    parameters, secret_keys = _resolve_parameters(cfn, plan)
    name = change_set_name(plan.template_body, parameters, secret_keys=secret_keys)

    stack = _describe_stack(cfn, plan.stack)
    if stack is not None and stack.status == _FAILED_CREATE:
        _delete_failed_create(cfn, stack, progress, deadline)
        stack = None
    if stack is not None and stack.busy:
        ours = _our_change_set(cfn, stack, name)
        if ours is not None and ours.get("ExecutionStatus") == "EXECUTE_IN_PROGRESS":
            # A retry of a deploy still running: wait for it instead of starting another.
            progress(f"Change set {name} is already executing; waiting for it")
            action: Literal["created", "updated"] = (
                "created" if stack.status.startswith("CREATE") else "updated"
            )
            done = _wait_for_stack(
                cfn, stack.stack_id, _event_ids(cfn, stack.stack_id), progress, deadline
            )
            return DeployOutcome(action, done.stack_id, done.status, name, done.outputs)
        raise ToolError(
            f"Stack {plan.stack!r} is busy ({stack.status}); try again once that operation ends."
        )
    if stack is not None and stack.status not in _UPDATABLE and stack.status != _REVIEW:
        raise ToolError(
            f"Stack {plan.stack!r} is in {stack.status} and cannot be updated; repair or delete "
            "it in CloudFormation (e.g. continue the rollback), then deploy again."
        )
    updating = stack is not None and stack.status != _REVIEW
    if stack is not None and updating and _is_current(cfn, stack, plan.template_body, parameters):
        if resumed:
            ours = _our_change_set(cfn, stack, name)
            if ours is not None and ours.get("ExecutionStatus") == "EXECUTE_COMPLETE":
                # This deploy's own change set made the stack what it is: the run that
                # stopped executed it. Saying "nothing was deployed" would hide that.
                made: Literal["created", "updated"] = (
                    "created" if stack.status.startswith("CREATE") else "updated"
                )
                return DeployOutcome(
                    made, stack.stack_id, stack.status, name, stack.outputs, by_earlier_run=True
                )
        return DeployOutcome("unchanged", stack.stack_id, stack.status, name, stack.outputs)

    replaced = ""
    if stack is not None:
        leftover = _our_change_set(cfn, stack, name)
        if not updating and leftover is not None and _ready_for(leftover, plan):
            # A create interrupted between its change set and its execution (the process died,
            # and this is the task resumed): the stack is still only that proposal, and the
            # change set's name is this plan's digest, so it is exactly what was confirmed.
            # Executing it finishes that create; rebuilding it would make a second proposal.
            return _execute(
                cfn,
                str(leftover["ChangeSetId"]),
                stack.stack_id,
                name,
                "created",
                progress,
                deadline,
            )
        if leftover is not None:
            # A leftover of an update is rebuilt, never executed blind: the stack may have
            # changed since it was computed.
            replaced = str(leftover["ChangeSetId"])
            checkpoint()
            cfn.delete_change_set(ChangeSetName=replaced)

    progress(f"Creating change set {name}")
    checkpoint()
    extra: dict[str, Any] = {} if updating else {"OnStackFailure": "DELETE"}
    try:
        created = cfn.create_change_set(
            StackName=plan.stack,
            ChangeSetName=name,
            ChangeSetType="UPDATE" if updating else "CREATE",
            TemplateBody=plan.template_body,
            Parameters=[
                {"ParameterKey": key, "ParameterValue": value} for key, value in parameters.items()
            ],
            Capabilities=list(plan.capabilities),
            Description="deploy_to_aws (MCP tool)",
            ClientToken=_token(
                "mrtr-cs",
                name,
                stack.stack_id if stack else plan.stack,
                stack.last_changed if stack else "",
                replaced,
            ),
            **extra,
        )
    except _botocore_exceptions().ClientError as error:
        if stack is not None and _is_no_changes(_error_of(error)[1]):
            return DeployOutcome("unchanged", stack.stack_id, stack.status, name, stack.outputs)
        raise
    change_set_id = str(created["Id"])
    stack_id = str(created["StackId"])

    try:
        cfn.get_waiter("change_set_create_complete").wait(
            ChangeSetName=change_set_id, WaiterConfig=deadline.waiter_config()
        )
    except _botocore_exceptions().WaiterError as error:
        last = getattr(error, "last_response", None) or {}
        reason = last.get("StatusReason")
        if stack is not None and last.get("Status") == "FAILED" and _is_no_changes(reason):
            cfn.delete_change_set(ChangeSetName=change_set_id)
            return DeployOutcome("unchanged", stack.stack_id, stack.status, name, stack.outputs)
        _withdraw(cfn, change_set_id, stack_id, creating=not updating)
        raise ToolError(f"Change set {name} could not be created: {reason or error}") from None

    kind: Literal["created", "updated"] = "updated" if updating else "created"
    return _execute(cfn, change_set_id, stack_id, name, kind, progress, deadline)


def _withdraw(cfn: Any, change_set_id: str, stack_id: str, *, creating: bool) -> None:
    """Take back a proposal that will not be executed (a cancel before its execution, a change
    set that failed): its change set, and for a create the empty stack CloudFormation made to
    hold it (REVIEW_IN_PROGRESS, no resources), so the account is left as the deploy found it.

    Best effort: the deploy has already failed or been cancelled, and that is what the user is
    told; a proposal left behind is logged, and the next deploy of the same plan replaces it.
    """
    what = "its change set"
    try:
        stack = _describe_stack(cfn, stack_id) if creating else None
        if stack is not None and stack.status == _REVIEW:
            what = "its change set and the empty stack made for it"
            token = _token("mrtr-withdraw", stack_id)
            cfn.delete_stack(StackName=stack_id, ClientRequestToken=token)
        else:
            cfn.delete_change_set(ChangeSetName=change_set_id)
    except Exception as error:  # ClientError, BotoCoreError, connection errors alike
        _logger.warning(
            "deploy_to_aws: could not take back change set %s (%s): %s",
            change_set_id,
            type(error).__name__,
            error,
        )
    else:
        _logger.info("deploy_to_aws: took back %s: %s", what, change_set_id)


def _ready_for(change_set: Mapping[str, Any], plan: StackPlan) -> bool:
    """Whether a change set of ours was made in full and never executed, with the plan's own
    capabilities (its name already says its template and parameters)."""
    return (
        change_set.get("Status") == "CREATE_COMPLETE"
        and change_set.get("ExecutionStatus") == "AVAILABLE"
        and sorted(change_set.get("Capabilities") or []) == sorted(plan.capabilities)
    )


def _execute(
    cfn: Any,
    change_set_id: str,
    stack_id: str,
    name: str,
    action: Literal["created", "updated"],
    progress: Progress,
    deadline: _Deadline,
) -> DeployOutcome:
    seen = _event_ids(cfn, stack_id)
    progress(f"Executing change set {name}")
    try:
        deadline.checkpoint()
    except RequestCancelled:
        # Cancelled with only a proposal made: take it back. (Not when the mark below is
        # refused: that can mean another run holds this task now, and it executes this very
        # change set.)
        _withdraw(cfn, change_set_id, stack_id, creating=action == "created")
        raise
    deadline.commit()
    cfn.execute_change_set(
        ChangeSetName=change_set_id, ClientRequestToken=_token("mrtr-exec", change_set_id)
    )
    done = _wait_for_stack(cfn, stack_id, seen, progress, deadline)
    return DeployOutcome(action, done.stack_id, done.status, name, done.outputs)


def require_boto3() -> Any:
    try:
        return importlib.import_module("boto3")
    except ImportError:
        raise ToolError(
            "deploy_to_aws needs boto3, which is not installed: "
            f"pip install '{_distribution()}[aws]'"
        ) from None


def aws_session(boto3: Any) -> Any:
    """A boto3 session of its own (credentials and configuration read anew, as each deploy
    must) that shares this process's one botocore data loader. The loader holds the service
    models and the endpoint rules, about a megabyte of JSON: parsed once per process, not once
    per session (it was most of a deploy's CPU). Tests make their clients with it too: a plain
    ``boto3.client`` parses that JSON again whenever moto has reset boto3's default session."""
    botocore_session = importlib.import_module("botocore.session").get_session()
    data_path = botocore_session.get_config_variable("data_path")  # AWS_DATA_PATH, if set
    botocore_session.register_component("data_loader", _data_loader(data_path))
    return boto3.session.Session(botocore_session=botocore_session)


@functools.cache
def _data_loader(data_path: str | None) -> Any:
    # Shared by deploys in several threads: it only ever adds to its caches of parsed files.
    return importlib.import_module("botocore.loaders").create_loader(data_path)


def _distribution() -> str:
    top = __name__.partition(".")[0]
    names = importlib.metadata.packages_distributions().get(top)
    return names[0] if names else top.replace("_", "-")


def _redact(text: str, secrets: list[str]) -> str:
    # AWS error messages can quote signed headers (SignatureDoesNotMatch), session token included,
    # connection errors quote the endpoint URL, user:password@ included (AWS_ENDPOINT_URL), and a
    # response botocore cannot parse is quoted whole (the credentials of a truncated AssumeRole).
    return redact_secrets(text, secrets)[:2000]


def run_deploy(
    plan: StackPlan,
    *,
    role_arn: str,
    region: str | None,
    progress: Progress = _ignore_progress,
    waits: WaitPolicy | None = None,
    checkpoint: Checkpoint = _carry_on,
    commit: PointOfNoReturn = _carry_on,
    resumed: bool = False,
) -> tuple[str, DeployOutcome]:
    """Assume `role_arn`, then deploy `plan` with its credentials. Blocks: run it in a thread.

    Region: the argument, else AWS_REGION, else AWS_DEFAULT_REGION, else the profile's.
    Endpoint: boto3 reads AWS_ENDPOINT_URL itself (configured endpoints, in every boto3 the
    `aws` extra allows), which is how the end-to-end test points everything at moto's server.
    """

    def deploy(cfn: Any) -> DeployOutcome:
        return deploy_stack(
            cfn,
            plan,
            progress=progress,
            waits=waits,
            checkpoint=checkpoint,
            commit=commit,
            resumed=resumed,
        )

    return _as_role(plan, role_arn, region, deploy, progress=progress, checkpoint=checkpoint)


def inspect_plan(plan: StackPlan, *, role_arn: str, region: str | None) -> PlanView:
    """What deploying `plan` as `role_arn` would do, read-only: for the user to confirm.

    Every parameter's value as the deploy sends it (given, else the template's default; NoEcho
    ones masked, as the template declares them, the stack's current value beside each), the
    stack's observed version, and what happens to its resources. It assumes the role and reads
    (GetTemplateSummary, DescribeStacks, GetTemplate); it writes nothing.
    """

    def look(cfn: Any) -> PlanView:
        values, secret_keys = _resolve_parameters(cfn, plan)
        stack = _describe_stack(cfn, plan.stack)
        standing = stack is not None and stack.status != _REVIEW
        now = stack.parameters if stack is not None and standing else {}
        shown = tuple(
            ShownParameter(
                key=key,
                shown=MASK if key in secret_keys else value,
                default=key not in plan.parameters,
                secret=key in secret_keys,
                was=now.get(key),
            )
            for key, value in values.items()
        )
        return PlanView(
            region="",
            account=role_arn.split(":")[4],
            role_arn=role_arn,
            parameters=shown,
            stack_version=stack_version(stack),
            resources=_resources(cfn, stack if standing else None, plan),
            matches=_matches(cfn, stack, plan, values, secret_keys),
        )

    resolved, view = _as_role(plan, role_arn, region, look)
    return dataclasses.replace(view, region=resolved)


def _resources(cfn: Any, stack: _Stack | None, plan: StackPlan) -> ResourceChanges | str:
    try:
        after = template_resources(plan.template_body)
        if stack is None:
            return resource_changes(None, after)
        deployed = cfn.get_template(StackName=stack.stack_id, TemplateStage="Original")
        before = template_resources(deployed["TemplateBody"])
    except ToolError as error:  # a template this reader cannot follow: say so, do not stop
        return f"not read ({error})"
    return resource_changes(before, after)


def _matches(
    cfn: Any,
    stack: _Stack | None,
    plan: StackPlan,
    values: Mapping[str, str],
    secret_keys: frozenset[str],
) -> bool:
    if stack is None or stack.status == _REVIEW:
        return False
    if stack.busy:
        name = change_set_name(plan.template_body, values, secret_keys=secret_keys)
        ours = _our_change_set(cfn, stack, name)
        return ours is not None and ours.get("ExecutionStatus") == "EXECUTE_IN_PROGRESS"
    return stack.status in _SUCCEEDED and _is_current(cfn, stack, plan.template_body, values)


def resolve_region(region: str | None) -> str:
    """The region a deploy goes to: the argument, else AWS_REGION, else AWS_DEFAULT_REGION,
    else the profile's. Reads local configuration only; blocks on files: run it in a thread."""
    return _region_of(lambda: aws_session(require_boto3()), region)


def _region_of(session: Callable[[], Any], region: str | None) -> str:
    # The session only when the argument and the environment are silent: making one registers
    # botocore's event handlers, a tenth of a second of CPU, to read one profile setting.
    resolved = (
        region
        or os.environ.get("AWS_REGION")
        or os.environ.get("AWS_DEFAULT_REGION")
        or session().region_name
    )
    if not resolved:
        raise ToolError("No AWS region: pass `region`, or set AWS_REGION for the server.")
    return str(resolved)


def _as_role(
    plan: StackPlan,
    role_arn: str,
    region: str | None,
    work: Callable[[Any], T],
    *,
    progress: Progress = _ignore_progress,
    checkpoint: Checkpoint = _carry_on,
) -> tuple[str, T]:
    """`work(cfn)` with a CloudFormation client of the assumed role, in the resolved region;
    every error it raises becomes a ToolError with every credential redacted."""
    boto3 = require_boto3()
    _keep_credentials_out_of_logs()
    config = importlib.import_module("botocore.config").Config(
        retries={"mode": "standard", "max_attempts": 5},  # retries Throttling with backoff
        user_agent_extra="mrtr-deploy_to_aws",
    )
    secrets: list[str] = []
    try:
        base = aws_session(boto3)
        resolved = _region_of(lambda: base, region)
        found = base.get_credentials()
        if found is not None:
            frozen = found.get_frozen_credentials()
            secrets += [
                str(value)
                for value in (frozen.access_key, frozen.secret_key, frozen.token)
                if value
            ]
            # An endpoint can echo what it was sent (the session token) into stack events and
            # outputs, bare; registered, they are redacted from progress, logs and results alike.
            treat_as_secret(*secrets)
        sts = base.client("sts", region_name=resolved, config=config)
        progress(f"Assuming role {role_arn}")
        checkpoint()
        credentials = assume_role(sts, role_arn, session_name=f"mrtr-deploy-{plan.stack}"[:64])
        secrets += credentials.secrets()
        treat_as_secret(*credentials.secrets())
        checkpoint()
        # The assumed role's client, from the same session: a botocore session registers its
        # hundreds of event handlers when made, a tenth of a second of CPU that a second
        # session per deploy would spend again for nothing but these three values.
        cfn = base.client(
            "cloudformation",
            region_name=resolved,
            config=config,
            aws_access_key_id=credentials.access_key_id,
            aws_secret_access_key=credentials.secret_access_key,
            aws_session_token=credentials.session_token,
        )
        return resolved, work(cfn)
    except ToolError as error:
        raise ToolError(_redact(str(error), secrets)) from None
    except _botocore_exceptions().ClientError as error:
        code, message = _error_of(error)
        operation = getattr(error, "operation_name", "call")
        raise ToolError(_redact(f"AWS {operation} failed: {code}: {message}", secrets)) from None
    except RequestCancelled:
        raise
    except Exception as error:
        # Not only BotoCoreError: botocore's ResponseParserError, urllib3's and the parsers'
        # own errors derive from Exception alone, and their text can quote the raw response.
        raise ToolError(
            _redact(f"AWS call failed: {type(error).__name__}: {error}", secrets)
        ) from None
