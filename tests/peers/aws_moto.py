"""moto's standalone server for the peer tests, and what it holds, read as the deployer would.

`deploy_to_aws` assumes the role the user answered and deploys with that role's credentials;
moto puts a stack in the account of the credentials that created it. So a test that answers a
role in an account of its own (`role_in(account)`) proves from moto's side which answer the
deploy used: the stack exists in that account (read through the same role), and nowhere else.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import boto3
from moto.server import ThreadedMotoServer

REGION = "us-east-1"
#: moto's default account: the one the dummy credentials below are in.
CALLER_ACCOUNT = "123456789012"
#: moto accepts any credentials; these keep the developer's own AWS setup out of the test.
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


def role_in(account: str) -> str:
    return f"arn:aws:iam::{account}:role/deployer"


@contextlib.contextmanager
def moto_server() -> Iterator[dict[str, str]]:
    """moto on a free loopback port; the environment that points a server (and boto3) at it."""
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    host, port = moto.get_host_and_port()
    try:
        yield {
            "AWS_ENDPOINT_URL": f"http://{host}:{port}",
            **CREDENTIALS,
            "AWS_REGION": REGION,
        }
    finally:
        moto.stop()


def _client(service: str, aws_env: dict[str, str], **credentials: str) -> Any:
    return boto3.client(
        service,
        region_name=REGION,
        endpoint_url=aws_env["AWS_ENDPOINT_URL"],
        aws_access_key_id=credentials.get("key", CREDENTIALS["AWS_ACCESS_KEY_ID"]),
        aws_secret_access_key=credentials.get("secret", CREDENTIALS["AWS_SECRET_ACCESS_KEY"]),
        aws_session_token=credentials.get("token"),
    )


def cloudformation_as(aws_env: dict[str, str], role_arn: str | None) -> Any:
    """CloudFormation as `role_arn` (assumed through moto's STS), or as the caller."""
    if role_arn is None:
        return _client("cloudformation", aws_env)
    sts = _client("sts", aws_env)
    found = sts.assume_role(RoleArn=role_arn, RoleSessionName="peer-check")["Credentials"]
    return _client(
        "cloudformation",
        aws_env,
        key=found["AccessKeyId"],
        secret=found["SecretAccessKey"],
        token=found["SessionToken"],
    )


def stack_status(aws_env: dict[str, str], stack: str, *, role_arn: str | None) -> str | None:
    """The stack's status in the account of `role_arn` (None: the caller's); None if absent."""
    summaries = cloudformation_as(aws_env, role_arn).list_stacks()["StackSummaries"]
    found = [summary["StackStatus"] for summary in summaries if summary["StackName"] == stack]
    return found[-1] if found else None


def stack_id(aws_env: dict[str, str], stack: str, *, role_arn: str) -> str:
    stacks = cloudformation_as(aws_env, role_arn).describe_stacks(StackName=stack)["Stacks"]
    return str(stacks[0]["StackId"])
