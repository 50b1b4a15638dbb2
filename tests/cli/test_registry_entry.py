"""The MCP Registry entry: a bake's server.json is valid against the registry's schema.

The registry publishes its JSON schema at the URL in server.json's `$schema`; no package ships
it, so a copy is checked in: tests/schemas/mcp-registry-server-2025-12-11.schema.json, version
2025-12-11, from https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json
(the same file is internal/validators/schemas/2025-12-11.json in the modelcontextprotocol/registry
repository). A newer schema means a new copy and a new `$schema` in the template's server.json.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from bakery import (
    COMBINATIONS,
    DEFAULT_PACKAGE,
    DEFAULT_SLUG,
    FULL_COMBINATIONS,
    REPO,
    bake_every_combination,
)

SCHEMA_VERSION = "2025-12-11"
SCHEMA_URL = f"https://static.modelcontextprotocol.io/schemas/{SCHEMA_VERSION}/server.schema.json"
SCHEMA = REPO / "tests" / "schemas" / f"mcp-registry-server-{SCHEMA_VERSION}.schema.json"
OWNER = "Octo-Cat42"


@pytest.fixture(scope="module")
def projects(tmp_path_factory: pytest.TempPathFactory) -> Mapping[str, Path]:
    """One bake per combination, published by the GitHub owner OWNER, for the whole module."""
    return bake_every_combination(
        tmp_path_factory, "registry", FULL_COMBINATIONS, github_owner=OWNER
    )


def validator() -> jsonschema.Draft7Validator:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    assert schema["$id"] == SCHEMA_URL
    return jsonschema.Draft7Validator(schema, format_checker=jsonschema.FormatChecker())


def load(project: Path, name: str) -> Any:
    return json.loads((project / name).read_text(encoding="utf-8"))


def package_version(project: Path) -> str:
    init = (project / "src" / DEFAULT_PACKAGE / "__init__.py").read_text(encoding="utf-8")
    match = re.search(r'^__version__ = "([^"]+)"$', init, re.MULTILINE)
    assert match is not None, "pyproject.toml reads the version from __init__.__version__"
    return match.group(1)


@pytest.mark.parametrize("combination", sorted(FULL_COMBINATIONS))
def test_server_json_is_valid_for_the_registry_and_names_the_pypi_package(
    projects: Mapping[str, Path], combination: str
) -> None:
    project = projects[combination]
    server = load(project, "server.json")
    errors = [error.message for error in validator().iter_errors(server)]
    assert errors == []
    assert server["$schema"] == SCHEMA_URL
    assert server["name"] == f"io.github.{OWNER}/{DEFAULT_SLUG}"
    (package,) = server["packages"]
    assert (package["registryType"], package["identifier"]) == ("pypi", DEFAULT_SLUG)
    assert package["transport"] == {"type": "stdio"}
    variables = {variable["name"]: variable for variable in package["environmentVariables"]}
    aws = COMBINATIONS[combination]["include_aws_example"] == "yes"
    if aws:
        assert {"AWS_PROFILE", "AWS_REGION"} <= set(variables)
    else:
        assert "AWS_PROFILE" not in variables
    assert variables["MRTR_SIGNING_KEY"]["isSecret"] is True
    assert all(variable["description"] for variable in variables.values())
    readme = (project / "README.md").read_text(encoding="utf-8")
    assert f"<!-- mcp-name: {server['name']} -->" in readme


@pytest.mark.parametrize("combination", sorted(FULL_COMBINATIONS))
def test_pyproject_server_json_and_the_manifest_carry_one_version(
    projects: Mapping[str, Path], combination: str
) -> None:
    version = package_version(projects[combination])
    server = load(projects[combination], "server.json")
    manifest = load(projects[combination], "manifest.json")
    assert [server["version"], server["packages"][0]["version"], manifest["version"]] == [
        version
    ] * 3


def test_the_schema_refuses_what_the_registry_refuses(projects: Mapping[str, Path]) -> None:
    # The checked-in schema has teeth: its limits are the registry's.
    server = load(projects["no-aws"], "server.json")
    for broken in (
        {**server, "description": "x" * 101},
        {**server, "name": "no-namespace"},
        {**server, "packages": [{**server["packages"][0], "version": "latest"}]},
    ):
        assert list(validator().iter_errors(broken)), broken
