"""hatchling's build hook: the wheel and the sdist ship only what the artifact rule allows.

The rule is the runtime's ``cli/_artifacts.py``. hatchling runs this for ``pip install .``,
``python -m build``, ``uv build`` and the Docker image's build stage. Files the filter excludes
are left out; a file it refuses stops the build with one line per file, naming it and why. An
editable install (``pip install -e .``) copies no source file, so it is not checked. The filter
is loaded by path: a build has none of the project's dependencies, and importing the package
would need them.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

PACKAGE = "{{ cookiecutter.package_name }}"
FILTER = Path("src", PACKAGE, "mrtr_runtime", "cli", "_artifacts.py")


def load_filter(root: Path) -> ModuleType:
    path = root / FILTER
    spec = importlib.util.spec_from_file_location("_mrtr_artifact_filter", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load the artifact filter from {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class ArtifactFilterHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name == "wheel" and version == "editable":
            return
        root = Path(self.root)
        rules = load_filter(root)
        gate = rules.ArtifactFilter.for_project(root, self.metadata.name, os.environ)
        config = self.build_config
        # hatchling skips the distribution paths a build reserves; a hatchling without that
        # set cannot leave a file out, so such a file stops the build instead.
        reserved = getattr(config, "build_reserved_paths", None)
        refused = []
        for included in config.builder.recurse_included_files():
            relative = included.relative_path or included.distribution_path
            verdict = gate.judge(Path(included.path), relative, root=root)
            if verdict is None:
                continue
            kind, reason = verdict
            if kind == rules.EXCLUDE and isinstance(reserved, set):
                reserved.add(included.distribution_path)
            else:
                refused.append((relative, reason))
        if refused:
            raise rules.ArtifactRefused(refused)
