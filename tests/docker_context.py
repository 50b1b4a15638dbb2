"""What `docker build` sends as its context, computed from `.dockerignore` without a daemon."""

from __future__ import annotations

import os
import re
from pathlib import Path


def docker_pattern(pattern: str) -> re.Pattern[str]:
    """A .dockerignore line as a regex: Go's filepath.Match plus `**`; a directory's match
    covers everything under it."""
    parts = []
    for token in re.split(r"(\*\*/|\*\*|\*|\?|\[[^\]]*\])", pattern.strip("/")):
        if token.startswith("["):
            parts.append(token)  # a character class means the same in both
        else:
            wildcards = {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}
            parts.append(wildcards.get(token, re.escape(token)))
    return re.compile("".join(parts) + "(?:/.*)?")


Rules = list[tuple[bool, re.Pattern[str]]]


def dockerignore_rules(project: Path) -> Rules:
    """Each line of the project's .dockerignore: whether it re-includes, and what it matches."""
    rules = []
    for line in (project / ".dockerignore").read_text(encoding="utf-8").splitlines():
        text = line.strip()
        if text and not text.startswith("#"):
            rules.append((text.startswith("!"), docker_pattern(text.removeprefix("!"))))
    return rules


def is_sent(rules: Rules, relative: str) -> bool:
    """Whether the file at ``relative`` goes into the context (the last matching rule decides)."""
    excluded = False
    for keep, rule in rules:
        if rule.fullmatch(relative):
            excluded = not keep
    return not excluded


def build_context(project: Path) -> list[str]:
    """What `docker build` sends: the files .dockerignore leaves in (its last match decides).

    As Docker does, a symbolic link is sent as a link, whatever it points at (or if nothing),
    and a linked directory is not entered.
    """
    rules = dockerignore_rules(project)
    entries = []
    for directory, subdirectories, files in os.walk(project):
        subdirectories.sort()
        entries += [
            Path(directory, name) for name in subdirectories if Path(directory, name).is_symlink()
        ]
        entries += [Path(directory, name) for name in files]
    relatives = (path.relative_to(project).as_posix() for path in entries)
    return sorted(relative for relative in relatives if is_sent(rules, relative))
