"""A baked project for the peer tests, with the conformance fixtures dropped in on request.

The server runs as `python -m <package>` from the project's `src/` (PYTHONPATH), with this
interpreter: the template's test environment already has what the generated project needs at run
time (anyio, pydantic; boto3 for the AWS example), and that skips a venv and an install per
test run. Installing a baked project is tested elsewhere; here what matters is the server.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
TEMPLATE = HERE.parent.parent
CONFORMANCE_TOOLS = HERE / "conformance_tools.py"


@dataclass(frozen=True)
class BakedProject:
    root: Path
    package: str

    @property
    def tools_dir(self) -> Path:
        return self.root / "src" / self.package / "tools"

    def server_command(self) -> list[str]:
        return [sys.executable, "-m", self.package]

    def server_env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """What the server process needs besides a minimal environment (HOME, PATH)."""
        env = {"PYTHONPATH": str(self.root / "src"), "PYTHONUNBUFFERED": "1"}
        env.update(extra or {})
        return env

    def tool_modules(self) -> list[str]:
        return sorted(
            path.stem for path in self.tools_dir.glob("*.py") if not path.name.startswith("_")
        )

    def add_conformance_tools(self) -> None:
        """Drop the conformance fixtures in as one more tools module (the registry finds it)."""
        shutil.copyfile(CONFORMANCE_TOOLS, self.tools_dir / CONFORMANCE_TOOLS.name)


def bake(output_dir: Path, *, project_name: str = "Peer Check", aws: bool = True) -> BakedProject:
    """Bake the template into `output_dir` with its hooks (they write the signing key)."""
    from cookiecutter.main import cookiecutter

    root = Path(
        cookiecutter(
            str(TEMPLATE),
            no_input=True,
            output_dir=str(output_dir),
            overwrite_if_exists=False,
            accept_hooks=True,
            extra_context={
                "project_name": project_name,
                "include_aws_example": "yes" if aws else "no",
            },
        )
    )
    packages = [
        path.parent.name
        for path in (root / "src").glob("*/__init__.py")
        if (path.parent / "mrtr_runtime").is_dir()
    ]
    if len(packages) != 1:
        raise RuntimeError(f"expected one package with a vendored runtime in {root}/src")
    return BakedProject(root=root, package=packages[0])
