"""The runtime's version moves with its code.

`tests/runtime_versions.json` records, for every version the template has had, the hash of its
runtime (`dev.py runtime_hash`: each module's path under `mrtr_runtime/`, sorted, and its bytes).
A version's entry is its runtime as the last commit of main before the next version's bump held
it: what a project baked at that version vendors. The runtime as this checkout holds it must hash
to the entry of its own `__version__`, so a runtime file cannot change without a new version (or,
before a release, a re-recorded hash), and every recorded version is described in CHANGELOG.md.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

from bakery import REPO

CHANGELOG = REPO / "CHANGELOG.md"


def load_dev_py() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dev_py", REPO / "dev.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


DEV = load_dev_py()


def test_the_runtime_hashes_to_the_recorded_hash_of_its_version() -> None:
    files = DEV.runtime_files()
    version = DEV.runtime_version(files)
    recorded = DEV.recorded_runtime_versions()
    digest = DEV.runtime_hash(files)
    assert recorded.get(version) == digest, (
        f"the runtime's files changed but its version is still {version} (recorded: "
        f"{recorded.get(version)}, now: {digest}). Bump __version__ in mrtr_runtime/__init__.py "
        "(the docstring and the line), add that version's heading and entry to CHANGELOG.md, "
        "then record the hash: python3 dev.py runtime-hash (or, while that version is not "
        "released yet, python3 dev.py runtime-hash --replace)"
    )


def test_every_recorded_version_has_a_changelog_heading() -> None:
    headings = re.findall(r"^## (\S+)$", CHANGELOG.read_text(encoding="utf-8"), re.MULTILINE)
    recorded = DEV.recorded_runtime_versions()
    assert set(recorded) <= set(headings), (
        f"no CHANGELOG.md heading: {set(recorded) - set(headings)}"
    )
    newest = max(recorded, key=lambda version: tuple(map(int, version.split("."))))
    assert newest == DEV.runtime_version(DEV.runtime_files()), "the newest entry is the runtime's"


def test_the_hash_moves_with_any_edit_rename_or_new_module() -> None:
    files = DEV.runtime_files()
    digest = DEV.runtime_hash(files)
    assert DEV.runtime_hash(dict(reversed(files.items()))) == digest  # order of discovery
    edited = {**files, "_jsonrpc.py": files["_jsonrpc.py"] + b"\n"}
    renamed = {("_wire2.py" if path == "_wire.py" else path): data for path, data in files.items()}
    added = {**files, "http/_new.py": b""}
    # Bytes moved from the end of one module to the start of the next: same concatenation.
    first, second = sorted(files)[:2]
    moved = {**files, first: files[first][:-1], second: files[first][-1:] + files[second]}
    hashes = {DEV.runtime_hash(changed) for changed in (edited, renamed, added, moved)}
    assert digest not in hashes and len(hashes) == 4


def test_recording_refuses_to_change_a_recorded_version_unless_told(tmp_path: Path) -> None:
    # A checkout whose runtime changed under an already recorded version.
    (tmp_path / "dev.py").write_bytes((REPO / "dev.py").read_bytes())
    runtime = tmp_path / DEV.RUNTIME
    runtime.mkdir(parents=True)
    (runtime / "__init__.py").write_text('"""x"""\n__version__ = "9.1.0"\n', encoding="utf-8")
    (tmp_path / "tests").mkdir()
    versions = tmp_path / "tests" / "runtime_versions.json"
    versions.write_text('{"9.1.0": "0000"}\n', encoding="utf-8")
    copy = importlib.util.spec_from_file_location("dev_copy", tmp_path / "dev.py")
    assert copy and copy.loader
    dev = importlib.util.module_from_spec(copy)
    copy.loader.exec_module(dev)
    assert dev.main(["runtime-hash"]) == 1
    assert versions.read_text(encoding="utf-8") == '{"9.1.0": "0000"}\n'
    assert dev.main(["runtime-hash", "--replace"]) == 0
    assert dev.recorded_runtime_versions() == {"9.1.0": dev.runtime_hash(dev.runtime_files())}
