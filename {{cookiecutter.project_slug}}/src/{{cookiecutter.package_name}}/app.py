"""This server: its name, its tools, and how it starts. This file is yours.

``PROJECT`` is all the runtime needs to know of this project; the command line (``main``: serve,
``http``, ``config``, ``keygen``, ``bundle``, ``health``), where the signing key comes from and
the host configurations are the runtime's (``mrtr_runtime``), and ``cruft update`` keeps them
current. Add tools as modules in ``tools/``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from . import __version__, tools
from .mrtr_runtime.server import Project, Server, run_command_line

PROJECT = Project(
    name="{{ cookiecutter.project_slug }}",
    title={{ cookiecutter.project_name | tojson }},
    version=__version__,
    tools=tools,
{%- if cookiecutter.include_aws_example == "yes" %}
    # What deploy_to_aws needs: boto3 (the `aws` extra), and the AWS profile and region a host
    # would otherwise not pass to the server.
    uv_extras=("aws",),
    pass_through_env=("AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION"),
{%- endif %}
)


def build_server(environ: Mapping[str, str] | None = None) -> Server:
    """The server, as hosts and tests get it (tests: ``MemoryClient(build_server())``)."""
    return PROJECT.build_server(environ)


def main(argv: Sequence[str] | None = None) -> int:
    """The console script, and ``python -m <this package>``; returns the exit status."""
    return run_command_line(PROJECT, argv)
