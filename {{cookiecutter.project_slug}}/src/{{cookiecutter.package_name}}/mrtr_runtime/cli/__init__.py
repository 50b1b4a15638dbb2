"""The command line wing: what ``<slug>`` does besides serving (``main(project)``).

- ``_commands.py``: the argument parser and each command (serve, http, health, config, keygen,
  bundle).
- ``_hosts.py``: host configuration snippets (Claude Desktop, Claude Code, VS Code, Cursor);
  standard library only, so the template's post-generation hook loads it by path.
- ``_bundle.py``: ``<slug> bundle``, the project as an MCP Bundle (``.mcpb``).
- ``_artifacts.py``: the one rule for what may ship in a wheel, sdist, bundle or image;
  standard library only, so the project's ``hatch_build.py`` loads it by path.

The project reaches it through ``mrtr_runtime.server.main``.
"""

from __future__ import annotations

from ._commands import main

__all__ = ("main",)
