"""Refuse answers that would give a broken or unsafe project, before any file is written.

Cookiecutter renders this file with Jinja and runs it with the (empty) project directory as the
working directory; a non-zero exit makes cookiecutter delete that directory again, so a refusal
leaves nothing on disk. We print exactly one line on stderr saying which answer is wrong and why.

What this hook cannot do: stop cookiecutter from evaluating Jinja in answers. Cookiecutter renders
every default (cookiecutter.json, key=value, --no-input, a config file's default_context) as a
template before any hook runs, so an expression in such an answer has already run when we see
its result. We can only refuse to generate a project from it (``check_not_evaluated``). Text
typed at a prompt or replayed is not rendered; it reaches us as is and ``check_common`` refuses
template markers in it.

Names (project_name, project_slug, package_name) end up in paths, in Python source, in TOML and in
shell commands printed for the user, so they are held to a strict ASCII grammar. Free text
(description, author_name) may carry ordinary punctuation; the templates escape it where it lands.
"""

from __future__ import annotations

import json
import keyword
import os
import re
import sys
import unicodedata
from collections.abc import Callable
from pathlib import Path

# The answers arrive as JSON *data* (tojson), never as Python source, so a quote or a backslash in
# an answer cannot break out of the string. The newlines around the JSON matter: without them the
# JSON's own closing quote would collide with the closing triple quote.
ANSWERS: dict[str, object] = json.loads(
    r"""
{{ cookiecutter | tojson }}
""".strip()
)
# The answers as cookiecutter was given them (cookiecutter.json overlaid with default_context and
# key=value), before it rendered them as Jinja templates.
RAW_ANSWERS: dict[str, object] = json.loads(
    r"""
{{ _cookiecutter | default({}) | tojson }}
""".strip()
)

FIELDS = (
    "project_name",
    "project_slug",
    "package_name",
    "description",
    "author_name",
    "author_email",
    "github_owner",
    "include_aws_example",
    "include_tasks",
    "include_http",
    "include_redis_store",
    "include_bundle",
    "include_skills",
)

# Every top-level module a baked project installs with all of its extras (the runtime's
# dependencies, aws, http, dev), by distribution: a package of the same name would shadow it, and
# the console script would die with ModuleNotFoundError or import the wrong code. This hook runs
# in cookiecutter's environment and cannot look them up, so they are data;
# tests/template/test_reserved_names.py recomputes them from an installed bake and fails on a
# missing one.
# Beyond this platform's bake: colorama (pytest and click need it on Windows) and sniffio (what
# the older anyio releases the runtime's "anyio>=4.7" allows depend on).
INSTALLED_MODULES: dict[str, tuple[str, ...]] = {
    "annotated-types": ("annotated_types",),
    "antlr4-python3-runtime": ("antlr4",),
    "anyio": ("anyio",),
    "ast-serialize": ("ast_serialize",),
    "attrs": ("attr", "attrs"),
    "aws-xray-sdk": ("aws_xray_sdk",),
    "blinker": ("blinker",),
    "boto3": ("boto3",),
    "botocore": ("botocore",),
    "certifi": ("certifi",),
    "cffi": ("cffi",),
    "cfn-lint": ("cfnlint",),
    "charset-normalizer": ("charset_normalizer",),
    "click": ("click",),
    "colorama": ("colorama",),
    "cryptography": ("cryptography",),
    "docker": ("docker",),
    "flask": ("flask",),
    "flask-cors": ("flask_cors",),
    "graphql-core": ("graphql",),
    "h11": ("h11",),
    "httptools": ("httptools",),
    "idna": ("idna",),
    "iniconfig": ("iniconfig",),
    "itsdangerous": ("itsdangerous",),
    "jinja2": ("jinja2",),
    "jmespath": ("jmespath",),
    "joserfc": ("joserfc",),
    "jsonpatch": ("jsonpatch", "jsonpatch_cli"),
    "jsonpath-ng": ("jsonpath_ng",),
    "jsonpointer": ("jsonpointer",),
    "jsonschema": ("jsonschema",),
    "jsonschema-path": ("jsonschema_path",),
    "jsonschema-specifications": ("jsonschema_specifications",),
    "lazy-object-proxy": ("lazy_object_proxy",),
    "librt": ("librt",),
    "markupsafe": ("markupsafe",),
    "moto": ("moto",),
    "mpmath": ("mpmath",),
    "mypy": ("mypy", "mypyc"),
    "mypy-extensions": ("mypy_extensions",),
    "networkx": ("networkx",),
    "openapi-schema-validator": ("openapi_schema_validator",),
    "openapi-spec-validator": ("openapi_spec_validator",),
    "opentelemetry-api": ("opentelemetry",),
    "packaging": ("packaging",),
    "pathable": ("pathable",),
    "pathspec": ("pathspec",),
    "pluggy": ("pluggy",),
    "py-partiql-parser": ("py_partiql_parser",),
    "pycparser": ("pycparser",),
    "pydantic": ("pydantic",),
    "pydantic-core": ("pydantic_core",),
    "pydantic-settings": ("pydantic_settings",),
    "pygments": ("pygments",),
    "pyjwt": ("jwt",),
    "pyparsing": ("pyparsing",),
    "pytest": ("py", "pytest"),
    "pytest-timeout": ("pytest_timeout",),
    "python-dateutil": ("dateutil",),
    "python-dotenv": ("dotenv",),
    "pyyaml": ("yaml",),
    "redis": ("redis",),
    "referencing": ("referencing",),
    "regex": ("regex",),
    "requests": ("requests",),
    "responses": ("responses",),
    "rfc3339-validator": ("rfc3339_validator",),
    "rpds-py": ("rpds",),
    "ruff": ("ruff",),
    "s3transfer": ("s3transfer",),
    "six": ("six",),
    "sniffio": ("sniffio",),
    "sympy": ("isympy", "sympy"),
    "typing-extensions": ("typing_extensions",),
    "typing-inspection": ("typing_inspection",),
    "urllib3": ("urllib3",),
    "uvicorn": ("uvicorn",),
    "uvloop": ("uvloop",),
    "werkzeug": ("werkzeug",),
    "wrapt": ("wrapt",),
    "xmltodict": ("xmltodict",),
}

# The commands those distributions put in the venv's bin/ directory, where the project's console
# script (named like the slug) would replace one of them or be replaced by it; only the names a
# slug can take. The same test recomputes them.
INSTALLED_COMMANDS: dict[str, tuple[str, ...]] = {
    "antlr4-python3-runtime": ("pygrun",),
    "cffi": ("cffi-gen-src",),
    "cfn-lint": ("cfn-lint",),
    "charset-normalizer": ("normalizer",),
    "flask": ("flask",),
    "idna": ("idna",),
    "jsonpatch": ("jsondiff", "jsonpatch"),
    "jsonpointer": ("jsonpointer",),
    "jsonschema": ("jsonschema",),
    "mypy": ("dmypy", "mypy", "mypyc", "stubgen", "stubtest"),
    "openapi-spec-validator": ("openapi-spec-validator",),
    "pygments": ("pygmentize",),
    "pytest": ("pytest",),
    "python-dotenv": ("dotenv",),
    "ruff": ("ruff",),
    "sympy": ("isympy",),
    "uvicorn": ("uvicorn",),
}
COMMANDS = frozenset(name for names in INSTALLED_COMMANDS.values() for name in names)

# What `python -m venv` puts in a fresh venv's site-packages before anything is installed, by
# distribution (the last Pythons that still bundle setuptools add it and its hooks).
VENV_MODULES: dict[str, tuple[str, ...]] = {
    "pip": ("pip",),
    "setuptools": ("setuptools", "pkg_resources", "_distutils_hack", "distutils"),
    "wheel": ("wheel",),
}

# Names a generated package or command must not take: those modules, the template's own tools
# (installing the project beside them would shadow them), the vendored runtime, pytest's test
# directories, and commands that live in the same venv's bin/ directory as our console script.
RESERVED = frozenset(
    {
        "cookiecutter",
        "hatchling",
        "hypothesis",
        "mcp",
        "mcp_types",
        "mrtr_runtime",
        "pip",
        "pip3",
        "python",
        "python3",
        "setuptools",
        "sitecustomize",
        "src",
        "test",
        "tests",
        "usercustomize",
        "uv",
        "wheel",
        "activate",
    }
    | {name for names in INSTALLED_MODULES.values() for name in names}
    | {name for names in VENV_MODULES.values() for name in names}
)

# Device names Windows reserves in every directory, with or without an extension ("con.txt" is
# the console too): a project directory, package directory or console script (<slug>.exe) named
# like this cannot be created, opened or deleted normally there.
WINDOWS_RESERVED = frozenset(
    {"con", "prn", "aux", "nul"}
    | {f"com{digit}" for digit in range(10)}
    | {f"lpt{digit}" for digit in range(10)}
)

PROJECT_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9 ._-]*[A-Za-z0-9])?")
PROJECT_SLUG = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
PACKAGE_NAME = re.compile(r"[a-z][a-z0-9_]*")
EMAIL = re.compile(
    r"[A-Za-z0-9._%+-]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)+"
)
# GitHub's rule for user and organization names, which the MCP Registry's io.github.<owner>
# namespace is: 1-39 ASCII letters, digits and single hyphens, no hyphen first or last.
GITHUB_OWNER = re.compile(r"[A-Za-z0-9](?:-?[A-Za-z0-9])*")
# Built from pieces: this file is itself a Jinja template, so the markers cannot appear literally.
BRACE = chr(123)
JINJA_MARKERS = (BRACE + BRACE, BRACE + "%", BRACE + "#")
# Unicode categories never allowed anywhere: controls (newline, tab, NUL, ESC…), format characters
# (bidi overrides, zero-width joiners: "Trojan Source"), line/paragraph separators, surrogates,
# private use and unassigned code points.
FORBIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})
AUTHOR_PUNCTUATION = frozenset(" .'-")
# "--!>" closes a comment too (HTML's "incorrectly closed comment" parse error).
HTML_COMMENT_MARKERS = ("<!--", "-->", "--!>")
# The line by which the MCP Registry checks who owns the PyPI package: one in the description
# would be a second claim in the README, whatever the comment around it.
REGISTRY_OWNER_LINE = re.compile(r"mcp-name\s*:", re.IGNORECASE)


class Refused(Exception):
    """One answer is not acceptable; the message says which and why."""


# unicodedata has no names for control characters; these are the ones people actually paste.
CONTROL_NAMES = {
    "\0": "NULL",
    "\t": "CHARACTER TABULATION",
    "\n": "LINE FEED",
    "\r": "CARRIAGE RETURN",
    "\x1b": "ESCAPE",
    "\x7f": "DELETE",
}


def describe_char(char: str) -> str:
    name = CONTROL_NAMES.get(char) or unicodedata.name(char, "control character")
    return f"U+{ord(char):04X} {name}"


def shown(value: str) -> str:
    # ascii() makes newlines, escapes and look-alike letters visible and keeps the message on one
    # line; long values are cut so the line stays readable.
    text = ascii(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_common(field: str, value: str) -> None:
    for char in value:
        if unicodedata.category(char) in FORBIDDEN_CATEGORIES:
            raise Refused(f"{field} {shown(value)} contains {describe_char(char)}; use one line")
    for marker in JINJA_MARKERS:
        if marker in value:
            raise Refused(f"{field} {shown(value)} contains the template marker {marker!r}")
    if "\\" in value:
        raise Refused(f"{field} {shown(value)} contains a backslash")
    if "../" in value or "..\\" in value:
        raise Refused(f"{field} {shown(value)} contains a parent-directory path ('../')")


def check_ascii_name(field: str, value: str) -> None:
    for char in value:
        if not char.isascii():
            raise Refused(
                f"{field} {shown(value)} contains the non-ASCII character {describe_char(char)}; "
                "names must be plain ASCII (look-alike letters are a common spoofing trick)"
            )


def check_windows_reserved(field: str, value: str) -> None:
    stem = value.split(".", 1)[0].rstrip(" ").lower()
    if stem in WINDOWS_RESERVED:
        raise Refused(
            f"{field} {shown(value)} is a device name reserved by Windows (CON, PRN, AUX, NUL, "
            "COM0-COM9, LPT0-LPT9, with or without an extension); choose another name"
        )


def check_project_name(value: str) -> None:
    check_ascii_name("project_name", value)
    if not 1 <= len(value) <= 80 or not PROJECT_NAME.fullmatch(value):
        raise Refused(
            f"project_name {shown(value)} must be 1-80 ASCII letters, digits, spaces, '.', '_' or "
            "'-', starting and ending with a letter or digit"
        )


def check_project_slug(value: str) -> None:
    check_ascii_name("project_slug", value)
    check_windows_reserved("project_slug", value)
    if not 2 <= len(value) <= 50 or not PROJECT_SLUG.fullmatch(value):
        raise Refused(
            f"project_slug {shown(value)} must be kebab-case: 2-50 characters of a-z, 0-9 and "
            "single '-', starting with a letter (it is the directory and the command name); "
            "pass project_slug=... to choose one"
        )
    if value in COMMANDS or value.replace("-", "_") in RESERVED:
        raise Refused(
            f"project_slug {shown(value)} would clash with a dependency or a command of the same "
            "name in the project's virtual environment; choose another"
        )


def check_package_name(value: str) -> None:
    check_ascii_name("package_name", value)
    check_windows_reserved("package_name", value)
    if not 2 <= len(value) <= 50 or not PACKAGE_NAME.fullmatch(value) or not value.isidentifier():
        raise Refused(
            f"package_name {shown(value)} must be a Python identifier of 2-50 characters: a-z, "
            "0-9 and '_', starting with a letter; pass package_name=... to choose one"
        )
    if keyword.iskeyword(value):
        raise Refused(f"package_name {shown(value)} is a Python keyword; choose another name")
    if value in RESERVED:
        raise Refused(
            f"package_name {shown(value)} is reserved (a dependency, a test directory or the "
            "vendored runtime would be shadowed); choose another name"
        )
    if value in sys.stdlib_module_names:
        raise Refused(
            f"package_name {shown(value)} would shadow the standard library module of the same "
            "name; choose another name"
        )


def check_description(value: str) -> None:
    # The MCP Registry refuses a server.json description longer than 100 characters.
    if not value.strip() or len(value) > 100:
        raise Refused(f"description {shown(value)} must be one line of 1-100 characters")
    if value != value.strip():
        raise Refused(f"description {shown(value)} starts or ends with whitespace")
    for marker in HTML_COMMENT_MARKERS:
        if marker in value:
            # The README renders the description as Markdown, two lines above the
            # "<!-- mcp-name: ... -->" marker by which the MCP Registry checks who owns the
            # PyPI package: a comment in the description could plant a second marker, or hide
            # the real one.
            raise Refused(
                f"description {shown(value)} contains the HTML comment marker {marker!r}, "
                "which would reach the README; leave it out"
            )
    if REGISTRY_OWNER_LINE.search(value):
        raise Refused(
            f"description {shown(value)} contains 'mcp-name:', the MCP Registry's ownership "
            "line, which the README carries once; leave it out"
        )


def check_author_name(value: str) -> None:
    if not 1 <= len(value) <= 100 or value != value.strip():
        raise Refused(f"author_name {shown(value)} must be 1-100 characters, trimmed")
    for char in value:
        # Core metadata renders authors as an e-mail address list ("Name <email>"), where commas,
        # quotes, '<', '>', '@' and parentheses mean something (PEP 621: no commas).
        category = unicodedata.category(char)
        if not (category[0] in "LM" or category == "Nd" or char in AUTHOR_PUNCTUATION):
            raise Refused(
                f"author_name {shown(value)} may contain letters, digits, spaces and . ' - only "
                f"(found {describe_char(char)})"
            )


def check_author_email(value: str) -> None:
    if len(value) > 254 or ".." in value or not EMAIL.fullmatch(value):
        raise Refused(
            f"author_email {shown(value)} is not a plain e-mail address (name@example.com)"
        )


def check_github_owner(value: str) -> None:
    check_ascii_name("github_owner", value)
    if len(value) > 39 or not GITHUB_OWNER.fullmatch(value):
        raise Refused(
            f"github_owner {shown(value)} must be a GitHub user or organization name: 1-39 "
            "ASCII letters, digits and single '-', not starting or ending with '-' (the MCP "
            "Registry names this server io.github.<owner>/<slug>)"
        )


def yes_or_no(option: str) -> Callable[[str], None]:
    """The check of an option that adds a part of the project or leaves it out."""

    def check(value: str) -> None:
        if value not in ("yes", "no"):
            raise Refused(f"{option} {shown(value)} must be 'yes' or 'no'")

    return check


CHECKS = {
    "project_name": check_project_name,
    "project_slug": check_project_slug,
    "package_name": check_package_name,
    "description": check_description,
    "author_name": check_author_name,
    "author_email": check_author_email,
    "github_owner": check_github_owner,
    "include_aws_example": yes_or_no("include_aws_example"),
    "include_tasks": yes_or_no("include_tasks"),
    "include_http": yes_or_no("include_http"),
    "include_redis_store": yes_or_no("include_redis_store"),
    "include_bundle": yes_or_no("include_bundle"),
    "include_skills": yes_or_no("include_skills"),
}


def template_defaults() -> dict[str, object]:
    repo_dir = ANSWERS.get("_repo_dir")
    if not isinstance(repo_dir, str):
        return {}
    # A local template given as a relative path (`cookiecutter .`) arrives as written, but hooks
    # run inside the new project: resolve it where the command was typed (the shell's PWD).
    places = [Path(repo_dir)]
    if not places[0].is_absolute() and os.environ.get("PWD"):
        places.insert(0, Path(os.environ["PWD"], repo_dir))
    for place in places:
        try:
            loaded = json.loads((place / "cookiecutter.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        return loaded if isinstance(loaded, dict) else {}
    return {}


def check_not_evaluated(defaults: dict[str, object]) -> None:
    # Cookiecutter renders each given default (key=value, default_context, --no-input) as a Jinja
    # template before this hook runs, so 7 * 7 between double braces arrives here as "49". The raw
    # answers still show it: refuse the project. Whatever the expression did has already happened.
    for field in FIELDS:
        raw = RAW_ANSWERS.get(field)
        if not isinstance(raw, str) or raw == defaults.get(field):
            continue
        if any(marker in raw for marker in JINJA_MARKERS):
            raise Refused(
                f"{field} {shown(raw)} contains template syntax, which cookiecutter evaluated; "
                "answers must be plain text"
            )


def validate(answers: dict[str, object], defaults: dict[str, object]) -> None:
    check_not_evaluated(defaults)
    for field in FIELDS:
        value = answers.get(field)
        if not isinstance(value, str):
            raise Refused(f"{field} must be text, got {type(value).__name__}")
        check_common(field, value)
        CHECKS[field](value)


def main() -> int:
    try:
        validate(ANSWERS, template_defaults())
    except Refused as refusal:
        sys.stderr.write(f"mrtr-server: refused: {refusal}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
