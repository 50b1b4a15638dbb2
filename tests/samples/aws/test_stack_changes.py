"""What deploy_to_aws shows of a deploy's resources before the yes (`tools/_stack_changes.py`).

The confirmation reads the template it would deploy and the one the stack runs, and names what
is added, deleted, replaced (a logical ID whose type changes) and changed. These tests hold the
reader to CloudFormation's own reading of YAML and JSON templates (short-form intrinsics equal
their long form; aliases are refused), and the comparison to a partition of the logical IDs.
"""

from __future__ import annotations

import importlib
import json
import os
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

PACKAGE = os.environ["MRTR_PACKAGE"]
changes = importlib.import_module(f"{PACKAGE}.tools._stack_changes")
engine = importlib.import_module(f"{PACKAGE}.tools._cloudformation")
ToolError = importlib.import_module(f"{PACKAGE}.mrtr_runtime").ToolError

SHORT = """
Resources:
  Queue:
    Type: AWS::SQS::Queue
    Properties:
      MessageRetentionPeriod: !Ref Retention
      QueueName: !Sub "${AWS::StackName}-q"
      Tags:
        - Key: arn
          Value: !GetAtt Topic.TopicArn
        - Key: pick
          Value: !Select [0, !GetAZs ""]
"""
LONG: dict[str, Any] = {
    "Resources": {
        "Queue": {
            "Type": "AWS::SQS::Queue",
            "Properties": {
                "MessageRetentionPeriod": {"Ref": "Retention"},
                "QueueName": {"Fn::Sub": "${AWS::StackName}-q"},
                "Tags": [
                    {"Key": "arn", "Value": {"Fn::GetAtt": ["Topic", "TopicArn"]}},
                    {"Key": "pick", "Value": {"Fn::Select": [0, {"Fn::GetAZs": ""}]}},
                ],
            },
        }
    }
}


def test_short_form_intrinsics_read_as_their_long_form() -> None:
    assert changes.template_resources(SHORT) == LONG["Resources"]
    # JSON is YAML; botocore hands a JSON template back already parsed (GetTemplate).
    assert changes.template_resources(json.dumps(LONG)) == LONG["Resources"]
    assert changes.template_resources(LONG) == LONG["Resources"]
    assert changes.resource_changes(changes.template_resources(SHORT), LONG["Resources"]).empty


def test_the_bundled_template_is_read() -> None:
    resources = changes.template_resources(engine.load_template("stack.yaml"))
    assert {key: value["Type"] for key, value in resources.items()} == {
        "Queue": "AWS::SQS::Queue",
        "QueueUrlParameter": "AWS::SSM::Parameter",
    }


@pytest.mark.parametrize(
    ("template", "why"),
    [
        # CloudFormation refuses aliases; refusing them also keeps a template from expanding
        # into an exponential comparison ("billion laughs").
        (
            "Resources:\n  A: &a {Type: X, Properties: {P: [1]}}\n  B: *a\n",
            "CloudFormation templates cannot use YAML aliases",
        ),
        ("Resources: [1, 2]\n", "no `Resources` mapping"),
        ("Resources:\n  A: 1\n", "no `Resources` mapping"),
        ("Parameters: {}\n", "no `Resources` mapping"),
        ("- just\n- a list\n", "no `Resources` mapping"),
        ("Resources: {A: {Type: X}\n", "cannot be read as YAML or JSON"),
    ],
)
def test_a_template_that_cannot_be_read_is_a_clear_error(template: str, why: str) -> None:
    with pytest.raises(ToolError, match=re.escape(why)):
        changes.template_resources(template)


def test_what_a_deploy_does_to_each_resource() -> None:
    before = {
        "Keep": {"Type": "AWS::SQS::Queue", "Properties": {"A": 1}},
        "Edit": {"Type": "AWS::SQS::Queue", "Properties": {"A": 1}},
        "Retype": {"Type": "AWS::SQS::Queue"},
        "Gone": {"Type": "AWS::SNS::Topic"},
    }
    after = {
        "Keep": {"Type": "AWS::SQS::Queue", "Properties": {"A": 1}},
        "Edit": {"Type": "AWS::SQS::Queue", "Properties": {"A": 2}},
        "Retype": {"Type": "AWS::SNS::Topic"},
        "New": {"Type": "AWS::SSM::Parameter", "DeletionPolicy": "Retain"},
    }
    found = changes.resource_changes(before, after)
    assert found.added == (("New", "AWS::SSM::Parameter"),)
    assert found.deleted == (("Gone", "AWS::SNS::Topic"),)
    assert found.replaced == (("Retype", "AWS::SQS::Queue", "AWS::SNS::Topic"),)
    assert found.changed == (("Edit", "AWS::SQS::Queue"),)
    # A new stack: everything is added.
    assert changes.resource_changes(None, after).added == (
        ("Edit", "AWS::SQS::Queue"),
        ("Keep", "AWS::SQS::Queue"),
        ("New", "AWS::SSM::Parameter"),
        ("Retype", "AWS::SNS::Topic"),
    )


LOGICAL_IDS = st.text("ABCDE", min_size=1, max_size=2)
RESOURCES = st.dictionaries(
    LOGICAL_IDS,
    st.fixed_dictionaries(
        {"Type": st.sampled_from(["AWS::SQS::Queue", "AWS::SNS::Topic"])},
        optional={"Properties": st.dictionaries(st.sampled_from("xy"), st.integers(0, 2))},
    ),
    max_size=6,
)


@given(RESOURCES, RESOURCES)
def test_every_logical_id_is_counted_once(before: dict[str, Any], after: dict[str, Any]) -> None:
    found = changes.resource_changes(before, after)
    named = [
        *(key for key, _ in found.added),
        *(key for key, _ in found.deleted),
        *(key for key, *_ in found.replaced),
        *(key for key, _ in found.changed),
    ]
    untouched = {key for key in set(before) & set(after) if before[key] == after[key]}
    assert len(named) == len(set(named))
    assert set(named) | untouched == set(before) | set(after)
    assert not set(named) & untouched
    assert found.empty == (before == after)
    # Round-tripped through YAML's JSON subset, a template reads back as itself.
    text = json.dumps({"Resources": after})
    assert changes.template_resources(text) == after
