"""Secrets: the signing key never reaches stdout, stderr or an error message, and errors never
echo a token's contents.

The server runs for real (``python -m <package>``, or a launcher that adds two probe tools to
the project's registry and then calls the same ``app.main``), with a known key
given through the environment or a key file. Every error path we can provoke is provoked, and
everything the process wrote is searched for the key in every spelling.

Style guide, "Fail closed, say little": the client learns "invalid requestState: <reason>" at
most; never the key, never the payload.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import stat
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from support import PACKAGE, PROJECT

BOUND = 30  # seconds for any one server run
KEY_FILE_NAME = ".mrtr-signing-key"
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
}
AWS_MARKERS = {
    "AWS_ACCESS_KEY_ID": "AKIAMARKER7Q2PZXW3NV",
    "AWS_SECRET_ACCESS_KEY": "marker/SecretAccessKey+do-not-print-0123456789",
    "AWS_SESSION_TOKEN": "MarkerSessionTokenFwoGZXIvYXdzEDoaDNotToBePrinted",
}
posix_only = pytest.mark.skipif(os.name != "posix", reason="file modes and FIFOs are POSIX")

# The launcher adds probe tools to the project's own registry, then starts the real CLI.
LAUNCHER = """
import os
import sys

from pydantic import BaseModel

from PACKAGE.mrtr_runtime import Context, ToolError, elicit_form
from PACKAGE.tools import registry


class Answer(BaseModel):
    text: str


@registry.tool()
async def secret_probe(n: int = 0, *, ctx: Context):
    '''Three rounds: ask "name", then "city", then finish.'''
    if ctx.form_answer("name", Answer) is None:
        return ctx.request_input({"name": elicit_form("Name?", Answer)})
    if ctx.form_answer("city", Answer) is None:
        return ctx.request_input({"city": elicit_form("City?", Answer)})
    return "done"


@registry.tool()
async def secret_fail(n: int = 0):
    '''Fails with an exception.'''
    raise RuntimeError("probe failure")


class ResponseParserError(Exception):
    '''Like botocore's: no library base class, and the raw response in its message.'''


def echoed_credentials():
    key_id, secret, token = (os.environ[name] for name in (
        "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"
    ))
    return repr(
        f"<Credentials><AccessKeyId>{key_id}</AccessKeyId><SecretAccessKey>{secret}"
        f"</SecretAccessKey><SessionToken>{token}\\r\\n"
        f"Authorization: AWS4-HMAC-SHA256 Credential={key_id}/20260728/us-east-1/sts/aws4_request"
        f", SignedHeaders=host, Signature=0f3e\\r\\nX-Amz-Security-Token: {token}\\r\\n".encode()
    )


@registry.tool()
async def secret_echo_fail(n: int = 0):
    '''Fails quoting a response that echoes the process's AWS credentials.'''
    raise ResponseParserError(f"probe failure: unable to parse {echoed_credentials()}")


@registry.tool()
async def secret_echo_tool_error(n: int = 0):
    '''A ToolError built from the same text.'''
    raise ToolError(f"AWS call failed: {echoed_credentials()}")


from PACKAGE.app import main

sys.exit(main([]))
"""


def key_spellings(hex_key: str) -> list[str]:
    """Every way a key could leak: hex in both cases, base64 and base64url of its bytes."""
    raw = bytes.fromhex(hex_key)
    spellings = [hex_key.lower(), hex_key.upper()]
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        text = encode(raw).decode()
        spellings += [text, text.rstrip("=")]
    # Any 16-hex-character window is long enough to count as a leak of part of it.
    spellings += [hex_key.lower()[i : i + 16] for i in range(0, len(hex_key) - 15, 8)]
    return spellings


def assert_absent(secrets_: list[str], *outputs: str | bytes) -> None:
    for output in outputs:
        text = output.decode("utf-8", "replace") if isinstance(output, bytes) else output
        for secret in secrets_:
            assert secret not in text, "a secret reached the output"


def clean_env(**extra: str) -> dict[str, str]:
    env = {
        name: value for name, value in os.environ.items() if not name.startswith(("MRTR_", "AWS_"))
    }
    env["MRTR_LOG_LEVEL"] = "DEBUG"
    env.update(AWS_MARKERS)
    env.update(extra)
    return env


def launcher(tmp_path: Path) -> list[str]:
    path = tmp_path / "launch_probe_server.py"
    path.write_text(LAUNCHER.replace("PACKAGE", PACKAGE))
    return [sys.executable, str(path)]


def run(
    command: list[str], env: dict[str, str], lines: Sequence[bytes] = ()
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        command,
        input=b"".join(lines),
        capture_output=True,
        timeout=BOUND,
        env=env,
        cwd=PROJECT,
        check=False,
    )


def request(request_id: object, method: str, params: dict[str, Any] | None = None) -> bytes:
    body = {"_meta": META, **(params or {})}
    return (
        json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": body}).encode()
        + b"\n"
    )


def probe_call(request_id: object, **extra: Any) -> bytes:
    return request(request_id, "tools/call", {"name": "secret_probe", "arguments": {}, **extra})


def responses(result: subprocess.CompletedProcess[bytes]) -> dict[object, dict[str, Any]]:
    found: dict[object, dict[str, Any]] = {}
    for raw in result.stdout.splitlines():
        message = json.loads(raw)
        found[message.get("id")] = message
    return found


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def flip(text: str, index: int) -> str:
    return text[:index] + ("A" if text[index] != "A" else "B") + text[index + 1 :]


# --- a serving server: every error path, the key in env or in a key file ---------------------


def provoke_every_error(
    command: list[str], env: dict[str, str]
) -> tuple[list[bytes], list[str], str]:
    """Run three sessions (a restart between rounds) and then a session of bad requests.

    Returns every stdout/stderr blob, every error message the client got, and the round-2 token
    (which carries a marker answer in its payload).
    """
    marker = "PAYLOAD-MARKER-" + secrets.token_hex(6)
    outputs: list[bytes] = []
    first = run(command, env, [probe_call(1)])
    outputs += [first.stdout, first.stderr]
    token_one = responses(first)[1]["result"]["requestState"]
    answer = {"action": "accept", "content": {"text": marker}}
    second = run(
        command, env, [probe_call(2, requestState=token_one, inputResponses={"name": answer})]
    )
    outputs += [second.stdout, second.stderr]
    token_two = responses(second)[2]["result"]["requestState"]
    version, kid, payload, tag = token_two.split(".")
    assert marker not in token_two and marker in unb64(payload).decode()

    forged_body = json.dumps(
        {
            "a": {"name": answer},
            "d": "x",
            "e": 4_000_000_000,
            "m": "tools/call",
            "q": {},
            "t": "secret_probe",
        }
    ).encode()
    bad_states: list[object] = [
        flip(token_two, len(token_two) - 3),  # tag
        flip(token_two, len(version) + len(kid) + 5),  # payload
        token_two[:-5],
        token_two + "xyz",
        f"{version}.{kid}.{payload}",
        f"{version}.00000000.{payload}.{tag}",
        f"p1.{payload}",
        f"p1.{b64(forged_body)}",
        f"eyJhbGciOiJub25lIn0.{payload}.",
        marker,
        "",
        {"token": token_two},
        [token_two],
        "m1." + "Q" * 70_000,
    ]
    lines = [
        probe_call(f"state-{i}", requestState=state, inputResponses={"city": answer})
        for i, state in enumerate(bad_states)
    ]
    lines += [
        request(
            "other-args",
            "tools/call",
            {
                "name": "secret_probe",
                "arguments": {"n": 9},
                "requestState": token_two,
                "inputResponses": {"city": answer},
            },
        ),
        request(
            "bad-shape",
            "tools/call",
            {
                "name": "secret_probe",
                "arguments": {},
                "requestState": token_two,
                "inputResponses": {"city": {"action": marker}},
            },
        ),
        request(
            "not-object",
            "tools/call",
            {"name": "secret_probe", "arguments": {}, "inputResponses": marker},
        ),
        request("fail", "tools/call", {"name": "secret_fail", "arguments": {}}),
        request("echo-fail", "tools/call", {"name": "secret_echo_fail", "arguments": {}}),
        request("echo-error", "tools/call", {"name": "secret_echo_tool_error", "arguments": {}}),
        request("unknown", "tools/call", {"name": marker, "arguments": {}}),
        request(
            "version",
            "tools/list",
            {"_meta": {**META, "io.modelcontextprotocol/protocolVersion": "1999"}},
        ),
        b"not json " + marker.encode() + b"\n",
        b"\xff" + marker.encode() + b"\n",
        b'{"jsonrpc":"2.0","id":"nan","method":"tools/list","params":{"x":NaN}}\n',
    ]
    third = run(command, env, lines)
    outputs += [third.stdout, third.stderr]
    messages = [
        message["error"]["message"] for message in responses(third).values() if "error" in message
    ]
    errors = {i: m for i, m in responses(third).items() if "error" in m}
    for i in range(len(bad_states)):
        assert errors[f"state-{i}"]["error"]["message"].startswith("Invalid requestState: ")
    # The echoing failures ran: logged with their traceback, answered with the redacted text.
    echoed = responses(third)["echo-error"]["result"]["content"][0]["text"]
    assert "<SecretAccessKey>[redacted]</SecretAccessKey>" in echoed
    assert b"ResponseParserError: probe failure" in third.stderr
    for blob in outputs:
        assert b"Traceback" not in blob or b"probe failure" in blob  # only the failing tool's log
    return outputs, messages, token_two


def assert_no_token_contents(messages: list[str], token: str, outputs: list[bytes]) -> None:
    _, _, payload, tag = token.split(".")
    marker = json.loads(unb64(payload))["a"]["name"]["content"]["text"]
    for message in messages:
        for part in (token, payload, tag, payload[:24], tag[:24]):
            assert part not in message
        if not message.startswith("Unknown tool"):
            assert marker not in message
    # The log may name the key id (public, in every token); never the payload or the tag.
    stderr = b"".join(outputs[1::2]).decode("utf-8", "replace")
    for part in (token, payload[:24], tag[:24]):
        assert part not in stderr


def test_the_key_from_the_environment_never_appears_in_any_output(tmp_path: Path) -> None:
    key, previous = secrets.token_hex(32), secrets.token_hex(32)
    env = clean_env(MRTR_SIGNING_KEY=key, MRTR_PREVIOUS_SIGNING_KEYS=f"{previous}, ")
    outputs, messages, token = provoke_every_error(launcher(tmp_path), env)
    assert_absent(key_spellings(key) + key_spellings(previous), *outputs, *messages)
    assert_absent(list(AWS_MARKERS.values()), *outputs, *messages)
    assert_no_token_contents(messages, token, outputs)


@posix_only
def test_the_key_from_a_key_file_never_appears_in_any_output(tmp_path: Path) -> None:
    key = secrets.token_hex(32)
    key_file = tmp_path / "signing.key"
    key_file.write_text(key + "\n")
    key_file.chmod(0o600)
    env = clean_env(MRTR_SIGNING_KEY_FILE=str(key_file))
    outputs, messages, token = provoke_every_error(launcher(tmp_path), env)
    assert_absent(key_spellings(key), *outputs, *messages)
    assert_no_token_contents(messages, token, outputs)


def responses_to_round(
    result: subprocess.CompletedProcess[bytes], request_id: object
) -> dict[str, Any]:
    response = responses(result)[request_id]
    assert "result" in response, response
    result_body: dict[str, Any] = response["result"]
    return result_body


@posix_only
def test_a_round_survives_keygen_rotate_and_no_key_reaches_any_output(tmp_path: Path) -> None:
    key_file = tmp_path / "keys" / KEY_FILE_NAME
    env = clean_env(MRTR_SIGNING_KEY_FILE=str(key_file))
    keygen = [sys.executable, "-m", PACKAGE, "keygen", "--path", str(key_file)]
    first_key = run(keygen, env)
    assert first_key.returncode == 0, first_key.stderr
    old_key = key_file.read_text().strip()

    first = run(launcher(tmp_path), env, [probe_call(1)])
    token = responses_to_round(first, 1)["requestState"]
    rotated = run([*keygen, "--rotate"], env)
    new_key = key_file.read_text().strip()
    answer = {"action": "accept", "content": {"text": "x"}}
    second = run(
        launcher(tmp_path),
        env,
        [probe_call(2, requestState=token, inputResponses={"name": answer})],
    )

    assert rotated.returncode == 0, rotated.stderr
    assert new_key != old_key
    assert responses_to_round(second, 2)["resultType"] == "input_required"
    previous_file = key_file.with_name(".mrtr-previous-signing-keys")
    assert str(previous_file) in rotated.stderr.decode()
    assert "paste" not in rotated.stderr.decode().lower()
    assert_absent(
        key_spellings(old_key) + key_spellings(new_key),
        first_key.stdout,
        first_key.stderr,
        first.stdout,
        first.stderr,
        rotated.stdout,
        rotated.stderr,
        second.stdout,
        second.stderr,
    )


# --- a server that refuses to start ------------------------------------------------------------


def refuses_to_start(env: dict[str, str], leaked: list[str]) -> str:
    result = run([sys.executable, "-m", PACKAGE], env, [request(1, "tools/list")])
    assert result.returncode == 2
    assert result.stdout == b"", "nothing may reach the wire before serving"
    stderr = result.stderr.decode("utf-8", "replace")
    assert "cannot start" in stderr
    assert "Traceback" not in stderr
    assert_absent(leaked, result.stdout, result.stderr)
    return stderr


WEAK_KEYS = {
    "too short": secrets.token_hex(16),
    "a placeholder": "00" * 32,
    "a repeating pattern": "0123456789abcdef" * 4,
    "not hex": "g" + secrets.token_hex(32)[1:],
    "odd length": secrets.token_hex(32) + "a",
    "base64 instead of hex": base64.b64encode(secrets.token_bytes(32)).decode(),
    "with an embedded newline": secrets.token_hex(16) + "\n" + secrets.token_hex(16),
}


@pytest.mark.parametrize("weak", WEAK_KEYS.values(), ids=WEAK_KEYS.keys())
def test_a_weak_key_in_the_environment_is_refused_without_echoing_it(weak: str) -> None:
    stderr = refuses_to_start(clean_env(MRTR_SIGNING_KEY=weak), [weak, *weak.split("\n")])
    assert "MRTR_SIGNING_KEY" in stderr


@pytest.mark.parametrize("weak", WEAK_KEYS.values(), ids=WEAK_KEYS.keys())
def test_a_weak_previous_key_is_refused_without_echoing_it_or_the_current_key(weak: str) -> None:
    key = secrets.token_hex(32)
    env = clean_env(
        MRTR_SIGNING_KEY=key, MRTR_PREVIOUS_SIGNING_KEYS=f"{secrets.token_hex(32)},{weak}"
    )
    stderr = refuses_to_start(env, [weak, *weak.split("\n"), *key_spellings(key)])
    assert "MRTR_PREVIOUS_SIGNING_KEYS" in stderr


def bad_key_files(tmp_path: Path) -> dict[str, tuple[Path, list[str]]]:
    secret = secrets.token_hex(32)
    files: dict[str, tuple[Path, list[str]]] = {}

    def write(name: str, data: bytes, leaked: list[str]) -> None:
        path = tmp_path / name
        path.write_bytes(data)
        path.chmod(0o600)
        files[name] = (path, leaked)

    write("empty", b"", [])
    write("weak", secrets.token_hex(16).encode(), [])
    write("not-hex", ("zz" + secret).encode(), [secret])
    write("not-ascii", "é".encode() + secret.encode(), [secret])
    write("too-large", ((secret + "\n") * 100).encode(), [secret])
    write("two-keys", f"{secret}\n{secrets.token_hex(32)}\n".encode(), [secret])
    files["missing"] = (tmp_path / "no-such-file", [])
    directory = tmp_path / "a-directory"
    directory.mkdir()
    files["a directory"] = (directory, [])
    if hasattr(os, "mkfifo"):
        fifo = tmp_path / "a-fifo"
        os.mkfifo(fifo)
        files["a FIFO"] = (fifo, [])
    return files


@posix_only
def test_bad_key_files_are_refused_without_echoing_their_contents(tmp_path: Path) -> None:
    for name, (path, leaked) in bad_key_files(tmp_path).items():
        # Each leaked secret also in its 16-character windows.
        spelled = [form for secret in leaked for form in key_spellings(secret)]
        stderr = refuses_to_start(clean_env(MRTR_SIGNING_KEY_FILE=str(path)), spelled)
        assert "MRTR_SIGNING_KEY_FILE" in stderr, name


@posix_only
@pytest.mark.parametrize("mode", [0o644, 0o604, 0o620, 0o602])
@pytest.mark.parametrize("which", ["key file", "previous keys file"])
def test_a_key_file_other_users_can_read_or_write_stops_start_without_quoting_it(
    tmp_path: Path, mode: int, which: str
) -> None:
    key, previous = secrets.token_hex(32), secrets.token_hex(32)
    key_file = tmp_path / "signing.key"
    key_file.write_text(key)
    previous_file = tmp_path / ".mrtr-previous-signing-keys"
    previous_file.write_text(previous + "\n")
    shared = key_file if which == "key file" else previous_file
    (previous_file if shared is key_file else key_file).chmod(0o600)
    shared.chmod(mode)

    stderr = refuses_to_start(
        clean_env(MRTR_SIGNING_KEY_FILE=str(key_file)), key_spellings(key) + key_spellings(previous)
    )
    assert f"chmod 600 {shared}" in stderr
    assert len(stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("MRTR_STATE_TTL_SECONDS", "forever"),
        ("MRTR_STATE_TTL_SECONDS", "-5"),
        ("MRTR_STATE_TTL_SECONDS", "3601"),
        ("MRTR_STATE_TTL_SECONDS", "9999999999"),
        ("MRTR_PREVIOUS_SIGNING_KEYS_FILE", "/nonexistent/previous-keys"),
    ],
)
def test_other_bad_settings_are_refused_without_echoing_the_key(variable: str, value: str) -> None:
    key = secrets.token_hex(32)
    stderr = refuses_to_start(
        clean_env(MRTR_SIGNING_KEY=key, **{variable: value}), key_spellings(key)
    )
    assert variable in stderr


# --- key files on disk -------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["1", "yes"])
def test_the_removed_plaintext_switch_is_ignored_in_one_line_and_tokens_stay_signed(
    tmp_path: Path, value: str
) -> None:
    key = secrets.token_hex(32)
    env = clean_env(MRTR_SIGNING_KEY=key, MRTR_INSECURE_PLAINTEXT=value)
    result = run(launcher(tmp_path), env, [probe_call(1)])

    assert result.returncode == 0, result.stderr
    stderr = result.stderr.decode("utf-8", "replace")
    said = [line for line in stderr.splitlines() if "MRTR_INSECURE_PLAINTEXT" in line]
    assert len(said) == 1, stderr
    assert "ignored" in said[0]
    assert "always signed" in said[0]
    token = responses(result)[1]["result"]["requestState"]
    assert token.startswith("m1.")  # signed, whatever the variable asked for
    assert_absent(key_spellings(key), result.stdout, result.stderr)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@posix_only
def test_keygen_writes_a_0600_file_even_with_umask_0_and_never_prints_the_key(
    tmp_path: Path,
) -> None:
    target = tmp_path / "keys" / KEY_FILE_NAME
    command = [sys.executable, "-m", PACKAGE, "keygen", "--path", str(target)]
    result = subprocess.run(
        command, capture_output=True, timeout=BOUND, env=clean_env(), check=False, umask=0
    )
    assert result.returncode == 0
    assert mode(target) == 0o600
    key = target.read_text().strip()
    assert result.stdout.decode().strip() == str(target)
    assert_absent(key_spellings(key), result.stdout, result.stderr)

    rotated = subprocess.run(
        [*command, "--rotate"],
        capture_output=True,
        timeout=BOUND,
        env=clean_env(),
        check=False,
        umask=0,
    )
    assert rotated.returncode == 0
    previous = target.with_name(".mrtr-previous-signing-keys")
    assert [line for line in previous.read_text().splitlines() if not line.startswith("#")] == [key]
    assert mode(target) == 0o600 and mode(previous) == 0o600
    new_key = target.read_text().strip()
    assert new_key != key
    assert_absent(key_spellings(key) + key_spellings(new_key), rotated.stdout, rotated.stderr)
    assert rotated.stdout.decode().strip() == str(target)

    forced = subprocess.run(
        [*command, "--force"],
        capture_output=True,
        timeout=BOUND,
        env=clean_env(),
        check=False,
        umask=0,
    )
    assert forced.returncode == 0
    newest = target.read_text().strip()
    assert mode(target) == 0o600 and newest != new_key
    # The old key is dropped, not offered for pasting anywhere.
    assert [line for line in previous.read_text().splitlines() if not line.startswith("#")] == [key]
    assert "MRTR_PREVIOUS_SIGNING_KEYS" not in forced.stderr.decode()
    assert_absent(key_spellings(new_key) + key_spellings(newest), forced.stdout, forced.stderr)


def test_keygen_refuses_to_overwrite_without_force_and_leaves_the_key_alone(tmp_path: Path) -> None:
    target = tmp_path / KEY_FILE_NAME
    key = secrets.token_hex(32)
    target.write_text(key)
    result = run([sys.executable, "-m", PACKAGE, "keygen", "--path", str(target)], clean_env())
    assert result.returncode == 1
    assert target.read_text() == key
    assert_absent(key_spellings(key), result.stdout, result.stderr)


def test_host_configs_never_carry_the_key(tmp_path: Path) -> None:
    key = secrets.token_hex(32)
    key_file = tmp_path / "k"
    key_file.write_text(key)
    for env in (clean_env(MRTR_SIGNING_KEY=key), clean_env(MRTR_SIGNING_KEY_FILE=str(key_file))):
        result = run([sys.executable, "-m", PACKAGE, "config", "all"], env)
        assert result.returncode == 0
        assert_absent(key_spellings(key), result.stdout, result.stderr)
        assert_absent(list(AWS_MARKERS.values()), result.stdout, result.stderr)


def test_the_key_file_is_git_ignored() -> None:
    patterns = (PROJECT / ".gitignore").read_text().splitlines()
    assert KEY_FILE_NAME in patterns
    assert f"{KEY_FILE_NAME}.*" in patterns  # temp files of an atomic replace
    assert ".mrtr-previous-signing-keys" in patterns
    assert ".mrtr-previous-signing-keys.*" in patterns


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_git_really_ignores_the_key_file_and_the_previous_key(tmp_path: Path) -> None:
    shutil.copy(PROJECT / ".gitignore", tmp_path / ".gitignore")
    git = shutil.which("git")
    assert git is not None
    subprocess.run([git, "init", "-q"], cwd=tmp_path, check=True, timeout=BOUND)
    names = [
        KEY_FILE_NAME,
        f"{KEY_FILE_NAME}.previous",
        f"{KEY_FILE_NAME}.abc123.tmp",
        ".mrtr-previous-signing-keys",
        ".mrtr-previous-signing-keys.abc123.tmp",
    ]
    for name in names:
        (tmp_path / name).write_text("x")
    ignored = subprocess.run(
        [git, "check-ignore", *names],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=BOUND,
        check=False,
    )
    assert sorted(ignored.stdout.split()) == sorted(names)


@posix_only
def test_the_projects_own_key_file_if_present_is_private() -> None:
    key_file = PROJECT / KEY_FILE_NAME
    if not key_file.exists():
        pytest.skip("baked without hooks: no key file was written")
    assert mode(key_file) == 0o600
