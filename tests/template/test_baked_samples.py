"""The template's samples suite passes against every wing and against none.

The samples suite (``tests/samples``: the engines behind the sample tools, end to end over pipes)
runs with a bake's own python against its package, under its own ``pytest.ini``: in full against
"aws" (every wing, and the AWS example) and against "minimal" (nothing that can be left out),
``tests/samples/aws`` only where the AWS example is baked. Slow (minutes), and part of every
``python3 dev.py test``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from bakery import COMBINATIONS, REPO, Installed, run_template_suite

pytestmark = pytest.mark.baked_checks

SAMPLES_SUITE = REPO / "tests" / "samples"
#: The samples of the AWS example (the CloudFormation engine, deploy_to_aws end to end).
AWS_SAMPLES = SAMPLES_SUITE / "aws"
#: The combinations the samples suite runs against: every wing, and none.
SAMPLES_COMBINATIONS = ("aws", "minimal")


@pytest.mark.parametrize("combination", SAMPLES_COMBINATIONS)
def test_the_samples_suite_passes_against_every_combination(
    installed: Callable[[str], Installed], combination: str
) -> None:
    aws = COMBINATIONS[combination]["include_aws_example"] == "yes"
    ignored: list[str | Path] = [] if aws else ["--ignore", AWS_SAMPLES]
    run_template_suite(installed(combination), SAMPLES_SUITE, *ignored)
