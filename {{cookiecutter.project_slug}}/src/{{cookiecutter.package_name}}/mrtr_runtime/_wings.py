"""The optional wings a project was generated with, and the one answer for a missing one.

A project carries only the wings its author picked when generating it (the template's options
``include_tasks``, ``include_http``, ``include_redis_store``, ``include_bundle`` and
``include_skills``): the modules of the others are not in its tree. Whatever would use a
missing wing (a command, a task method, a task store URL, an import of ``serve_http``, a
``skills/`` folder) asks here, and says which option leaves it out and how to add it, rather
than failing on a ``ModuleNotFoundError`` deep in the runtime.

Wings are loaded by name (``importlib``), never imported from the runtime's other modules: a
project without a wing must still pass ``mypy --strict``, which follows every static import.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
from dataclasses import dataclass
from types import ModuleType
from typing import Final, Literal

from ._errors import MrtrError

__all__ = ("WINGS", "WingMissing", "has_wing", "load_wing", "missing_wing")

WingName = Literal["tasks", "http", "redis", "bundle", "skills"]


@dataclass(frozen=True)
class Wing:
    #: The wing's module, relative to this package.
    module: str
    #: The template option that generates it.
    option: str
    #: What it is, as a sentence names it.
    title: str


WINGS: Final[dict[WingName, Wing]] = {
    "tasks": Wing("._tasks", "include_tasks", "the tasks extension (the task engine)"),
    "http": Wing(".http", "include_http", "the Streamable HTTP transport"),
    "redis": Wing(".redis", "include_redis_store", "the Redis task store"),
    "bundle": Wing(".cli._bundle", "include_bundle", "the MCP Bundle and Registry files"),
    "skills": Wing("._skills", "include_skills", "the skills extension (Agent Skills)"),
}


class WingMissing(MrtrError, RuntimeError):
    """What was asked for needs a wing this project was generated without."""


def has_wing(name: WingName) -> bool:
    """Whether this project's runtime holds the wing (a lookup on disk; imports nothing of it)."""
    return importlib.util.find_spec(WINGS[name].module, __package__) is not None


def missing_wing(name: WingName) -> str:
    """The sentence for a missing wing: which option left it out, and how to add it."""
    wing = WINGS[name]
    answer = json.dumps({wing.option: "yes"})
    return (
        f"this project was generated without {wing.title} (template option {wing.option}=no); "
        f"add it with: cruft update -y --variables-to-update '{answer}' "
        '(README.md, "Adding a wing")'
    )


def load_wing(name: WingName, module: str | None = None) -> ModuleType:
    """The wing's module (or ``module``, another of its modules, relative to this package);
    `WingMissing` when the project was generated without the wing."""
    if not has_wing(name):
        raise WingMissing(missing_wing(name))
    return importlib.import_module(module or WINGS[name].module, __package__)
