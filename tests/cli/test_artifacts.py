"""Every artifact of a bake (wheel, sdist, bundle, Docker build context and the image's wheel)
ships nothing a developer's checkout may hold besides the project: files are planted under
``src/<package>/`` of a fresh bake, with and without its ``.gitignore``, and each artifact is
made the way a user makes it (``uv build``, ``<slug> bundle``, ``docker build``'s context from
``.dockerignore`` and the ``pip install .`` of its build stage).

Each artifact is made twice: with every planted file, when the build may refuse (it must name
each file it refuses), then without the refused ones, when it must succeed. A planted file is
then ``refused``, ``excluded`` or ``SHIPPED``; only the first two pass, a copy of a signing key
must be refused (a problem to fix, not to hide), and no member of any artifact may hold a key's
bytes. The table (artifact x planted file) is written to stderr (``pytest -s``) and to
``artifact-table-*.txt`` in the test's temporary directory.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType

import pytest
from bakery import (
    COMBINATIONS,
    DEFAULT_PACKAGE,
    DEFAULT_SLUG,
    KEY_FILE,
    REPO,
    bake_project,
    run,
)
from docker_context import build_context, dockerignore_rules, is_sent
from hypothesis import given
from hypothesis import strategies as st
from uv import find_uv_bin

PREVIOUS_KEYS_FILE = ".mrtr-previous-signing-keys"
UV_SETTINGS = {"UV_CACHE_DIR": str(REPO / ".cache" / "uv"), "UV_SYSTEM_CERTS": "1"}
REFUSED_LINE = re.compile(r"refusing to ship (\S+): (.+)")
#: What each planted file holds, relative to src/<package>/; "->" makes a symbolic link.
CURRENT, PREVIOUS = "<current key hex>", "<previous key hex>"
PLANTED: Mapping[str, str] = {
    ".aws/credentials": "[default]\naws_secret_access_key = planted\n",
    "credentials.json": '{"refresh_token": "planted"}\n',
    "key.bak": CURRENT,
    "signing-key": f"-> ../../{KEY_FILE}",
    ".env": "TOKEN=planted\n",
    ".env.local": "TOKEN=planted\n",
    "notes.txt": PREVIOUS,
    "fixture.bin": "<current key bytes>",
    "id_rsa": "-----BEGIN OPENSSH PRIVATE KEY-----\nplanted\n",
}
#: The ones whose bytes are a key: these must stop every build, never be quietly left out.
KEY_COPIES = ("key.bak", "signing-key", "notes.txt", "fixture.bin")
ARCHIVE_SUFFIXES = (".whl", ".tar.gz", ".mcpb")
ARTIFACTS = ("wheel", "sdist", "bundle", "docker context", "image wheel")


def plant(project: Path) -> list[bytes]:
    """Plant ``PLANTED`` and a previous-keys file; the keys (current, previous) as raw bytes."""
    current = bytes.fromhex((project / KEY_FILE).read_text(encoding="ascii").strip())
    previous = secrets.token_bytes(32)
    previous_file = project / PREVIOUS_KEYS_FILE
    previous_file.write_text(f"# retired\n{previous.hex()}\n", encoding="ascii")
    previous_file.chmod(0o600)
    package = project / "src" / DEFAULT_PACKAGE
    for relative, content in PLANTED.items():
        path = package / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if content.startswith("-> "):
            path.symlink_to(content.removeprefix("-> "))
        elif content == "<current key bytes>":
            path.write_bytes(b"\x00fixture" + current + b"\x00")
        else:
            text = content.replace(CURRENT, f"old key: {current.hex()}")
            path.write_text(text.replace(PREVIOUS, f"retired: {previous.hex()}"), "utf-8")
    return [current, previous]


def holds_key(data: bytes, keys: list[bytes]) -> bool:
    return any(
        key in data or key.hex().encode() in data.lower() or key.hex().upper().encode() in data
        for key in keys
    )


def archive_members(archive: Path) -> dict[str, bytes]:
    """Each member's bytes; a link member holds b"<link>", so it is always found out."""
    if archive.suffix in (".whl", ".mcpb"):
        with zipfile.ZipFile(archive) as opened:
            return {name: opened.read(name) for name in opened.namelist()}
    members = {}
    with tarfile.open(archive) as opened:
        for member in opened.getmembers():
            if member.issym() or member.islnk():
                members[member.name] = b"<link>"
            elif member.isfile():
                handle = opened.extractfile(member)
                members[member.name] = handle.read() if handle is not None else b""
    return members


def uv_build(kind: str) -> Callable[[Path, Path], subprocess.CompletedProcess[str]]:
    def build(project: Path, out: Path) -> subprocess.CompletedProcess[str]:
        command = [find_uv_bin(), "build", f"--{kind}", "--out-dir", out, project]
        return run(command, cwd=project.parent, env=UV_SETTINGS, check=False)

    return build


def bundle(project: Path, out: Path) -> subprocess.CompletedProcess[str]:
    # From the source tree, as `<slug> bundle` runs in an editable install.
    command = [sys.executable, "-m", DEFAULT_PACKAGE, "bundle", "--output-dir", out]
    return run(command, cwd=project, env={"PYTHONPATH": str(project / "src")}, check=False)


def image_wheel(project: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """The build stage's `pip install .`, on exactly what the build context sends."""
    context = out.parent / f"{out.name}-context"
    shutil.rmtree(context, ignore_errors=True)
    for relative in build_context(project):
        source, target = project / relative, context / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))  # Docker sends a link as a link
        else:
            shutil.copy2(source, target)
    # The build secrets the Dockerfile mounts for that step, from the files `docker build
    # --secret` names (README.md): the key, and the previous keys beside it.
    secrets_dir = out.parent / f"{out.name}-secrets"
    shutil.rmtree(secrets_dir, ignore_errors=True)
    secrets_dir.mkdir()
    for secret, source in SECRET_MOUNTS.items():
        if (project / source).exists():
            shutil.copy2(project / source, secrets_dir / secret)
    key_file = secrets_dir / KEY_SECRET
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", out, context]
    return run(
        command,
        cwd=out.parent,
        check=False,
        env={"MRTR_SIGNING_KEY_FILE": str(key_file)},
    )


#: The Dockerfile's build secrets: target file name -> the file `docker build --secret` reads.
KEY_SECRET = "mrtr-signing-key"  # noqa: S105 (the name of a build secret, not a secret)
SECRET_MOUNTS = {KEY_SECRET: KEY_FILE, PREVIOUS_KEYS_FILE: PREVIOUS_KEYS_FILE}


def test_the_image_build_reads_the_keys_from_the_secrets_this_test_mounts(
    tmp_path: Path,
) -> None:
    dockerfile = (bake_project(tmp_path, **COMBINATIONS["no-aws"]) / "Dockerfile").read_text()
    step = re.sub(r"\\\n\s*", " ", dockerfile)
    (install,) = [line for line in step.splitlines() if line.startswith("RUN --mount")]
    mounts = dict(re.findall(r"--mount=type=secret,id=([\w-]+),target=(\S+)", install))
    assert mounts == {
        KEY_SECRET: f"/run/secrets/{KEY_SECRET}",
        PREVIOUS_KEYS_FILE.lstrip("."): f"/run/secrets/{PREVIOUS_KEYS_FILE}",
    }
    assert f"MRTR_SIGNING_KEY_FILE={mounts[KEY_SECRET]} " in install
    assert install.index("MRTR_SIGNING_KEY_FILE=") < install.index("pip install")


BUILDERS = {
    "wheel": uv_build("wheel"),
    "sdist": uv_build("sdist"),
    "bundle": bundle,
    "image wheel": image_wheel,
}


def make(
    name: str, planted: Path, work: Path, keys: list[bytes]
) -> tuple[dict[str, str], list[str]]:
    """Make artifact ``name`` from a copy of ``planted``: each planted file's verdict, and the
    members of the artifact that hold a key's bytes."""
    project = work / name.replace(" ", "-") / DEFAULT_SLUG
    shutil.copytree(planted, project, symlinks=True)
    out = project.parent / "dist"
    first = BUILDERS[name](project, out)
    refused = {match[1] for match in REFUSED_LINE.finditer(first.stdout + first.stderr)}
    verdicts = {}
    for relative in PLANTED:
        path = f"src/{DEFAULT_PACKAGE}/{relative}"
        if path in refused:
            verdicts[relative] = "refused"
            (project / path).unlink()
    if first.returncode != 0:
        shutil.rmtree(out, ignore_errors=True)
        again = BUILDERS[name](project, out)
        if again.returncode != 0:
            # Failed for another reason than a refusal: the table says so, and the test fails.
            failed = {relative: "BUILD FAILED" for relative in PLANTED if relative not in verdicts}
            return {**verdicts, **failed}, [f"(no {name}: {again.stderr.strip()[-300:]})"]
    (archive,) = [path for path in out.iterdir() if path.name.endswith(ARCHIVE_SUFFIXES)]
    members = archive_members(archive)
    for relative in PLANTED:
        if relative not in verdicts:
            shipped = any(member.endswith(f"{DEFAULT_PACKAGE}/{relative}") for member in members)
            verdicts[relative] = "SHIPPED" if shipped else "excluded"
    return verdicts, [member for member, data in members.items() if holds_key(data, keys)]


def table(rows: Mapping[str, Mapping[str, str]], title: str) -> str:
    width = max(len(name) for name in PLANTED) + 2
    lines = [
        title,
        "planted file".ljust(width) + "".join(f"{a:<16}" for a in ARTIFACTS),
    ]
    for relative in PLANTED:
        cells = "".join(f"{rows[artifact][relative]:<16}" for artifact in ARTIFACTS)
        lines.append(relative.ljust(width) + cells)
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("gitignore", ["with .gitignore", "without .gitignore"])
def test_no_artifact_ships_a_planted_secret_and_a_key_copy_stops_every_build(
    tmp_path: Path, gitignore: str
) -> None:
    planted = bake_project(tmp_path / "bake", **COMBINATIONS["no-aws"])
    if gitignore.startswith("without"):
        (planted / ".gitignore").unlink()
    keys = plant(planted)
    rows: dict[str, dict[str, str]] = {}
    with_keys: dict[str, list[str]] = {}
    for name in BUILDERS:
        rows[name], with_keys[name] = make(name, planted, tmp_path / "work", keys)
    context = build_context(planted)
    rows["docker context"] = {
        relative: "in context" if f"src/{DEFAULT_PACKAGE}/{relative}" in context else "excluded"
        for relative in PLANTED
    }
    report = table(rows, f"artifact x planted file ({gitignore})")
    sys.stderr.write(report)
    (tmp_path / f"artifact-table-{gitignore.split()[0]}.txt").write_text(report, "utf-8")

    shipped = [
        (artifact, relative, verdict)
        for artifact, verdicts in rows.items()
        for relative, verdict in verdicts.items()
        if verdict in ("SHIPPED", "BUILD FAILED")
    ]
    assert shipped == [], report
    assert {name: members for name, members in with_keys.items() if members} == {}, report
    for artifact in ("wheel", "sdist", "bundle"):
        assert [rows[artifact][name] for name in KEY_COPIES] == ["refused"] * len(KEY_COPIES), (
            report
        )
    # What the context still carries (a key copy a pattern cannot name) the image build refused.
    for relative, verdict in rows["docker context"].items():
        if verdict == "in context":
            assert rows["image wheel"][relative] == "refused", report


# -- the rule itself, loaded as the build hook loads it -------------------------------------


@pytest.fixture(scope="module")
def rule(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    project = bake_project(tmp_path_factory.mktemp("rule"), **COMBINATIONS["no-aws"])
    path = project / "src" / DEFAULT_PACKAGE / "mrtr_runtime" / "cli" / "_artifacts.py"
    spec = importlib.util.spec_from_file_location("artifact_filter_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


segment = st.text(st.characters(blacklist_characters="/\\\0"), min_size=1, max_size=12).filter(
    lambda text: text not in (".", "..")
)


@given(parts=st.lists(segment, min_size=1, max_size=6))
def test_a_path_with_any_hidden_component_is_excluded_and_naming_never_fails(
    rule: ModuleType, parts: list[str]
) -> None:
    verdict = rule.name_verdict("/".join(parts))
    assert verdict is None or verdict[0] in (rule.EXCLUDE, rule.REFUSE)
    if any(part.startswith(".") for part in parts):
        assert verdict == (rule.EXCLUDE, rule.HIDDEN)


@given(
    prefix=st.binary(max_size=2048),
    suffix=st.binary(max_size=2048),
    upper=st.booleans(),
)
def test_a_key_is_found_anywhere_in_a_file_in_either_hex_case_or_raw(
    rule: ModuleType,
    tmp_path_factory: pytest.TempPathFactory,
    prefix: bytes,
    suffix: bytes,
    upper: bool,
) -> None:
    key = secrets.token_bytes(32)
    gate = rule.ArtifactFilter([key])
    directory = tmp_path_factory.mktemp("scan")
    for form in (key, (key.hex().upper() if upper else key.hex()).encode()):
        path = directory / "data.txt"
        path.write_bytes(prefix + form + suffix)
        assert gate.judge(path, "data.txt") == (rule.REFUSE, rule.HOLDS_KEY)
    clean = directory / "clean.txt"
    clean.write_bytes(prefix + key[:-1] + suffix.replace(key, b""))
    if not holds_key(clean.read_bytes(), [key]):
        assert gate.judge(clean, "clean.txt") is None


def test_a_key_across_the_scan_s_chunk_boundary_is_found(rule: ModuleType, tmp_path: Path) -> None:
    key = secrets.token_bytes(32)
    path = tmp_path / "big.dat"
    # The key's hex straddles the first chunk's end, at the bound and at 10 times it.
    for chunks in (1, 10):
        boundary = rule._CHUNK_BYTES * chunks
        path.write_bytes(b"x" * (boundary - 20) + key.hex().encode() + b"x" * 100)
        assert rule.ArtifactFilter([key]).judge(path, "big.dat") == (
            rule.REFUSE,
            rule.HOLDS_KEY,
        )


#: The forms a copy of a key takes without anyone meaning to hide it (each found by a rule).
KEY_FORMS: Mapping[str, Callable[[bytes], bytes]] = {
    "split across lines": lambda key: f"{key.hex()[:32]}\n{key.hex()[32:]}\n".encode(),
    "concatenated literals": lambda key: f'K = "{key.hex()[:30]}" "{key.hex()[30:]}"'.encode(),
    "spaced hex": lambda key: " ".join(f"{byte:02x}" for byte in key).encode(),
    "0x bytes": lambda key: ", ".join(f"0x{byte:02X}" for byte in key).encode(),
    "colon hex": lambda key: ":".join(f"{byte:02x}" for byte in key).encode(),
    "escaped bytes": lambda key: "".join(f"\\x{byte:02x}" for byte in key).encode(),
    "bytes repr": lambda key: f"K = {key!r}".encode(),
    "base64": lambda key: base64.b64encode(key),
    "base64url": lambda key: base64.urlsafe_b64encode(key),
    "base64, 1 byte in": lambda key: base64.b64encode(b"\x01" + key + b"\x02"),
    "base64, 2 bytes in": lambda key: base64.b64encode(b"\x01\x02" + key),
    "wrapped base64": lambda key: b"\n".join(
        base64.b64encode(b"pad" * 7 + key)[i : i + 19] for i in range(0, 72, 19)
    ),
    "UTF-16-LE hex": lambda key: key.hex().encode("utf-16"),
    "UTF-16-BE hex": lambda key: key.hex().upper().encode("utf-16-be"),
}


@pytest.mark.parametrize("form", KEY_FORMS)
@given(prefix=st.binary(max_size=256), suffix=st.binary(max_size=256))
def test_a_key_is_found_in_each_form_a_copy_takes_and_another_key_s_is_not(
    rule: ModuleType,
    tmp_path_factory: pytest.TempPathFactory,
    form: str,
    prefix: bytes,
    suffix: bytes,
) -> None:
    key, other = secrets.token_bytes(32), secrets.token_bytes(32)
    path = tmp_path_factory.mktemp("forms") / "data.txt"
    # A newline either side: a form is found wherever it is, but is not glued to random bytes
    # that would make it another text (base64 of other bytes, say).
    path.write_bytes(prefix + b"\n" + KEY_FORMS[form](key) + b"\n" + suffix)
    assert rule.ArtifactFilter([key]).judge(path, "data.txt") == (
        rule.REFUSE,
        rule.HOLDS_KEY,
    )
    assert rule.ArtifactFilter([other]).judge(path, "data.txt") is None


@pytest.mark.parametrize("form", ["spaced hex", "0x bytes", "escaped bytes", "base64"])
@pytest.mark.parametrize("chunks", [1, 10])
@pytest.mark.parametrize("shift", range(4))
def test_a_separated_key_across_the_scan_s_chunk_boundary_is_found(
    rule: ModuleType, tmp_path: Path, form: str, chunks: int, shift: int
) -> None:
    # Each shift puts the boundary after another byte of the form: inside ``0x``, ``\x``, ", ".
    key = secrets.token_bytes(32)
    path = tmp_path / "big.dat"
    path.write_bytes(b"." * (rule._CHUNK_BYTES * chunks - shift) + KEY_FORMS[form](key))
    assert rule.ArtifactFilter([key]).judge(path, "big.dat") == (
        rule.REFUSE,
        rule.HOLDS_KEY,
    )


AWS_ID, AWS_SECRET = "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


@pytest.mark.parametrize(
    "text",
    [
        f"User name,Password,Access key ID,Secret access key\nu,p,{AWS_ID},{AWS_SECRET}\n",
        f"aws_secret_access_key = {AWS_SECRET}\naws_access_key_id = {AWS_ID}\n",
        f'{{"AccessKeyId": "ASIA{AWS_ID[4:]}", "SecretAccessKey": "{AWS_SECRET}"}}',
    ],
)
def test_an_aws_access_key_id_beside_its_secret_is_refused(
    rule: ModuleType, tmp_path: Path, text: str
) -> None:
    path = tmp_path / "users.csv"
    path.write_text(text, "utf-8")
    assert rule.ArtifactFilter([]).judge(path, "users.csv") == (
        rule.REFUSE,
        rule.AWS_KEY,
    )


@pytest.mark.parametrize(
    "text",
    [
        f"the key id {AWS_ID} alone, as the redaction tests name it\n",
        f"a secret alone: {AWS_SECRET}\n",
        # A commit id is 40 characters a secret may hold too, but in one case only.
        f"{AWS_ID} at commit {'0123456789abcdef' * 2}01234567\n",
        f"{AWS_ID}\n" + "." * 10 * 512 + f"\n{AWS_SECRET}\n",
    ],
)
def test_an_aws_key_id_or_secret_alone_or_far_apart_is_not_refused(
    rule: ModuleType, tmp_path: Path, text: str
) -> None:
    path = tmp_path / "notes.txt"
    path.write_text(text, "utf-8")
    assert rule.ArtifactFilter([]).judge(path, "notes.txt") is None


@pytest.mark.parametrize("chunks", [1, 10])
def test_an_aws_key_pair_across_the_scan_s_chunk_boundary_is_found(
    rule: ModuleType, tmp_path: Path, chunks: int
) -> None:
    path = tmp_path / "big.csv"
    # The id ends the chunk, its secret, at the bound of nearness, starts the next one.
    gap = "," * (rule._AWS_NEAR - 1)
    head = b"." * (rule._CHUNK_BYTES * chunks - len(AWS_ID) - len(gap))
    path.write_bytes(head + f"{AWS_ID}{gap}{AWS_SECRET}\n".encode())
    assert rule.ArtifactFilter([]).judge(path, "big.csv") == (rule.REFUSE, rule.AWS_KEY)


def baked(rule: ModuleType) -> Path:
    """The bake the rule under test is from."""
    return Path(str(rule.__file__)).parents[4]


#: Names of credential files as people and tools write them: each is refused in every case.
CREDENTIAL_NAMES = (
    "credentials",
    "credentials.json",
    "credentials.ini",
    "new_user_credentials.csv",
    "admin_accessKeys.csv",
    "secrets",
    "secrets.toml",
    "env",
    "prod.env",
    "service-account.json",
    "my-project-service_account-1234.json",
    "server.pem",
    "key.pem.txt",
    "tls.key",
    "bundle.p12",
    "cert.pfx",
    "aws_config",
    "aws_credentials",
    "netrc",
    "pypirc",
    "id_rsa",
    "id_ed25519.pub",
)
SPELLINGS = (str.lower, str.upper, str.title, str.swapcase)


@pytest.mark.parametrize("name", CREDENTIAL_NAMES)
def test_a_credential_name_in_any_case_is_refused_and_kept_out_of_the_docker_context(
    rule: ModuleType, name: str
) -> None:
    rules = dockerignore_rules(baked(rule))
    for spelling in SPELLINGS:
        relative = f"src/{DEFAULT_PACKAGE}/sub/{spelling(name)}"
        assert rule.name_verdict(relative) == (rule.REFUSE, rule.CREDENTIAL), relative
        assert not is_sent(rules, relative), relative


#: Pieces of names: the words the rule knows, suffixes, and what may join or pad them.
WORDS = ("credentials", "secrets", "env", "accesskeys", "service-account", "service_account")
SUFFIXES = ("pem", "key", "p12", "pfx", "aws_config", "id_rsa", "id_ed25519", "csv", "json")
word = st.sampled_from([*WORDS, *SUFFIXES, "toml", "py", "server", "x", "", ".", "_", "-", "1"])


@given(
    words=st.lists(word, min_size=1, max_size=5),
    swap=st.lists(st.booleans(), max_size=60),
)
def test_the_docker_context_keeps_out_exactly_the_files_the_filter_refuses_by_name(
    rule: ModuleType, words: list[str], swap: list[bool]
) -> None:
    name = "".join(words)
    name = (
        "".join(c.swapcase() if flip else c for c, flip in zip(name, swap, strict=False))
        + name[len(swap) :]
    )
    if not name or name.startswith(".") or name in (".", ".."):
        return
    relative = f"src/{DEFAULT_PACKAGE}/{name}"
    verdict = rule.name_verdict(relative)
    sent = is_sent(dockerignore_rules(baked(rule)), relative)
    assert sent == (verdict is None), (relative, verdict)


@pytest.mark.parametrize("platform", ["linux", "darwin", "win32"])
def test_the_filter_looks_for_the_per_user_key_where_the_runtime_keeps_it(
    rule: ModuleType, tmp_path: Path, platform: str
) -> None:
    project = bake_project(tmp_path / "bake", **COMBINATIONS["no-aws"])
    environments = [
        {"HOME": "/home/u"},
        {"HOME": "/home/u", "XDG_STATE_HOME": "/state"},
        {"HOME": "relative", "XDG_STATE_HOME": "relative"},
        {"LOCALAPPDATA": "C:\\Users\\u\\AppData\\Local"},
        {"USERPROFILE": "C:\\Users\\u"},
        {},
    ]
    script = (
        "import json, sys\n"
        f"from {DEFAULT_PACKAGE}.mrtr_runtime._config import per_user_key_path\n"
        "for environ in json.loads(sys.argv[1]):\n"
        f"    path = per_user_key_path({DEFAULT_SLUG!r}, environ, platform={platform!r})\n"
        "    print(path)\n"
    )
    runtime = run(
        [sys.executable, "-c", script, json.dumps(environments)],
        cwd=project,
        env={"PYTHONPATH": str(project / "src")},
    ).stdout.splitlines()
    ours = [
        str(rule.per_user_key_path(DEFAULT_SLUG, environ, platform=platform))
        for environ in environments
    ]
    assert ours == runtime
