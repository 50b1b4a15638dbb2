"""Signing keys: parsing, the environment's precedence rules, rotation, TTL, the removed plaintext
switch, key files, the per-user key file of an installed server, the server identity tokens are
bound to.

The key itself must never reach a message, a log line or a repr: every test that can check it does.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from mrtr_runtime._config import (
    MAX_PREVIOUS_KEYS,
    PREVIOUS_KEYS_FILE_ENV,
    PREVIOUS_KEYS_FILE_NAME,
    SigningConfigError,
    WeakSigningKey,
    codec_from_environment,
    default_previous_keys_file,
    load_or_create_key_file,
    per_user_key_path,
    rotate_key_file,
    write_key_file,
)
from mrtr_runtime._tokens import (
    DEFAULT_TTL_SECONDS,
    MAX_TTL_SECONDS,
    Binding,
    InvalidRequestState,
    KeyRing,
    RequestStateCodec,
    SigningKey,
    digest_arguments,
    new_signing_key_hex,
    parse_signing_key,
)
from support import PACKAGE, PROJECT

HEX_A = bytes(range(32)).hex()
HEX_B = bytes(range(100, 132)).hex()
HEX_C = bytes(range(200, 240)).hex()  # 40 bytes: longer keys are fine
NOW = 1_800_000_000.0
BINDING = Binding("tools/call", "greet", digest_arguments({}))
ANSWER = {"action": "accept", "content": {"name": "Alice"}}

posix_only = pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")


def key_id(hex_text: str) -> str:
    return hashlib.sha256(bytes.fromhex(hex_text)).hexdigest()[:8]


def load(
    environ: dict[str, str],
    default_key_file: Path | None = None,
    *,
    audience: str = "srv",
    per_user_key_file: Path | None = None,
) -> RequestStateCodec:
    return codec_from_environment(
        environ,
        default_key_file=default_key_file,
        per_user_key_file=per_user_key_file,
        audience=audience,
        clock=lambda: NOW,
    )


def minting_kid(state_codec: RequestStateCodec) -> str:
    return state_codec.mint(BINDING, {}, {}).split(".")[1]


def write(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG, logger="mrtr_runtime")
    return caplog


def assert_no_secrets(text: str) -> None:
    for secret in (HEX_A, HEX_B, HEX_C):
        assert secret not in text
        assert secret[:16] not in text


# --- SigningKey and KeyRing --------------------------------------------------------------------


def test_key_id_is_the_first_8_hex_characters_of_sha256_of_the_secret() -> None:
    assert SigningKey(bytes.fromhex(HEX_A)).key_id == key_id(HEX_A)


def test_key_repr_never_shows_the_secret() -> None:
    key = SigningKey(bytes.fromhex(HEX_A))

    assert_no_secrets(repr(key) + repr(KeyRing(key)))
    assert repr(bytes.fromhex(HEX_A)) not in repr(key)


def test_key_with_a_wrong_id_is_refused() -> None:
    with pytest.raises(ValueError, match="key_id"):
        SigningKey(bytes.fromhex(HEX_A), "00000000")


def test_key_shorter_than_32_bytes_cannot_be_built() -> None:
    with pytest.raises(WeakSigningKey):
        SigningKey(b"x" * 31)


def test_key_ring_takes_any_sequence_of_previous_keys_as_a_tuple() -> None:
    ring = KeyRing(parse_signing_key(HEX_A), [parse_signing_key(HEX_B)])  # type: ignore[arg-type]

    assert ring.previous == (parse_signing_key(HEX_B),)


# --- parse_signing_key -------------------------------------------------------------------------


@pytest.mark.parametrize("text", [HEX_A, HEX_A.upper(), f"  {HEX_A}\n", HEX_C])
def test_hex_key_of_32_bytes_or_more_is_accepted(text: str) -> None:
    assert parse_signing_key(text).secret == bytes.fromhex(text.strip())


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "empty"),
        ("   \n", "empty"),
        (HEX_A[:62], "31 bytes"),
        (HEX_A[:-1], "not hex"),
        (HEX_A[:-2] + "zz", "not hex"),
        ("0x" + HEX_A, "not hex"),
        (HEX_A[:32] + " " + HEX_A[32:], "not hex"),
        ("00" * 32, "placeholder"),
        ("0123456789abcdef" * 4, "placeholder"),
        ("correct horse battery staple, but long enough to be 32 bytes", "not hex"),
    ],
)
def test_weak_or_malformed_key_is_refused_without_echoing_it(text: str, problem: str) -> None:
    with pytest.raises(WeakSigningKey, match=problem) as info:
        parse_signing_key(text, source="MRTR_SIGNING_KEY")

    message = str(info.value)
    assert message.startswith("MRTR_SIGNING_KEY ")
    assert "secrets.token_hex(32)" in message
    if text.strip():
        assert text.strip() not in message
        assert text.strip()[:12] not in message


def test_new_signing_keys_are_64_hex_characters_and_never_repeat() -> None:
    keys = {new_signing_key_hex() for _ in range(50)}

    assert len(keys) == 50
    assert all(len(key) == 64 and parse_signing_key(key) for key in keys)


# --- precedence --------------------------------------------------------------------------------


def test_inline_key_wins_over_key_file_and_default_file(tmp_path: Path) -> None:
    named = write(tmp_path / "named.key", HEX_B)
    default = write(tmp_path / "default.key", HEX_C)

    state_codec = load({"MRTR_SIGNING_KEY": HEX_A, "MRTR_SIGNING_KEY_FILE": str(named)}, default)

    assert minting_kid(state_codec) == key_id(HEX_A)


def test_key_file_wins_over_the_default_file(tmp_path: Path) -> None:
    named = write(tmp_path / "named.key", HEX_B + "\n")
    default = write(tmp_path / "default.key", HEX_C)

    assert minting_kid(load({"MRTR_SIGNING_KEY_FILE": str(named)}, default)) == key_id(HEX_B)


def test_default_key_file_is_used_when_nothing_is_configured(
    tmp_path: Path, logs: pytest.LogCaptureFixture
) -> None:
    default = write(tmp_path / "default.key", HEX_C)

    assert minting_kid(load({}, default)) == key_id(HEX_C)
    assert not [r for r in logs.records if r.levelno >= logging.WARNING]


def test_empty_variables_count_as_unset(tmp_path: Path) -> None:
    default = write(tmp_path / "default.key", HEX_C)
    environ = {"MRTR_SIGNING_KEY": "", "MRTR_SIGNING_KEY_FILE": "  ", "MRTR_INSECURE_PLAINTEXT": ""}

    assert minting_kid(load(environ, default)) == key_id(HEX_C)


def test_without_any_key_a_random_key_signs_and_a_warning_says_rounds_die_with_the_process(
    tmp_path: Path, logs: pytest.LogCaptureFixture
) -> None:
    first = load({}, tmp_path / "absent.key")
    second = load({}, None)

    minted = first.mint(BINDING, {"q": ANSWER}, {"q": "elicitation/create"})
    assert first.verify(minted, BINDING).answers == {"q": ANSWER}
    with pytest.raises(InvalidRequestState, match="unknown key"):
        second.verify(minted, BINDING)  # what a restarted server sees
    warnings = [r for r in logs.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    assert "restart" in warnings[0].getMessage()
    assert str(tmp_path / "absent.key") in warnings[0].getMessage()


def test_weak_inline_key_stops_start_and_names_the_variable() -> None:
    with pytest.raises(WeakSigningKey, match="MRTR_SIGNING_KEY is 16 bytes") as info:
        load({"MRTR_SIGNING_KEY": HEX_A[:32]})

    assert HEX_A[:32] not in str(info.value)


def test_configured_key_file_that_is_missing_is_an_error_not_a_fallback(tmp_path: Path) -> None:
    default = write(tmp_path / "default.key", HEX_C)
    missing = tmp_path / "nope.key"

    with pytest.raises(WeakSigningKey, match="cannot be read") as info:
        load({"MRTR_SIGNING_KEY_FILE": str(missing)}, default)
    assert str(missing) in str(info.value)
    assert "MRTR_SIGNING_KEY_FILE" in str(info.value)


@posix_only
@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads anything")
def test_unreadable_key_file_is_an_error(tmp_path: Path) -> None:
    locked = write(tmp_path / "locked.key", HEX_A, mode=0o000)

    with pytest.raises(WeakSigningKey, match="cannot be read"):
        load({"MRTR_SIGNING_KEY_FILE": str(locked)})


def test_key_file_that_is_a_directory_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(WeakSigningKey, match="not a regular file"):
        load({"MRTR_SIGNING_KEY_FILE": str(tmp_path)})


def test_key_file_with_a_weak_key_names_the_file_not_the_key(tmp_path: Path) -> None:
    weak = write(tmp_path / "weak.key", HEX_A[:40])

    with pytest.raises(WeakSigningKey, match="20 bytes") as info:
        load({}, weak)
    assert str(weak) in str(info.value)
    assert HEX_A[:40] not in str(info.value)


@posix_only
def test_key_file_that_is_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.key"
    os.mkfifo(fifo)

    with pytest.raises(WeakSigningKey, match="not a regular file"):
        load({"MRTR_SIGNING_KEY_FILE": str(fifo)})


def test_key_file_that_is_not_text_or_too_large_is_refused(tmp_path: Path) -> None:
    binary = tmp_path / "binary.key"
    binary.write_bytes(b"\xff\xfe" * 40)
    binary.chmod(0o600)
    huge = write(tmp_path / "huge.key", HEX_A * 100)

    with pytest.raises(WeakSigningKey, match="not hex"):
        load({"MRTR_SIGNING_KEY_FILE": str(binary)})
    with pytest.raises(WeakSigningKey, match="too large"):
        load({"MRTR_SIGNING_KEY_FILE": str(huge)})


@posix_only
@pytest.mark.parametrize("mode", [0o644, 0o604, 0o640, 0o620, 0o602, 0o660, 0o666, 0o601])
def test_key_file_other_users_can_read_or_write_stops_start(
    tmp_path: Path, logs: pytest.LogCaptureFixture, mode: int
) -> None:
    shared = write(tmp_path / "shared.key", HEX_A, mode=mode)

    with pytest.raises(WeakSigningKey) as info:
        load({"MRTR_SIGNING_KEY_FILE": str(shared)})
    message = str(info.value)
    assert f"chmod 600 {shared}" in message
    assert oct(mode) in message
    assert "\n" not in message
    assert_no_secrets(message + logs.text)


@posix_only
@pytest.mark.parametrize("mode", [0o644, 0o620])
def test_default_key_file_other_users_can_read_or_write_stops_start(
    tmp_path: Path, mode: int
) -> None:
    default = write(tmp_path / "default.key", HEX_A, mode=mode)

    with pytest.raises(WeakSigningKey, match="chmod 600"):
        load({}, default)


@posix_only
@pytest.mark.parametrize("mode", [0o600, 0o400])
def test_key_file_only_its_owner_can_read_is_accepted(tmp_path: Path, mode: int) -> None:
    private = write(tmp_path / "private.key", HEX_A, mode=mode)

    assert minting_kid(load({"MRTR_SIGNING_KEY_FILE": str(private)})) == key_id(HEX_A)


def test_key_file_path_may_start_with_a_tilde(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    write(tmp_path / "home.key", HEX_B)

    assert minting_kid(load({"MRTR_SIGNING_KEY_FILE": "~/home.key"})) == key_id(HEX_B)


# --- previous keys (rotation) ------------------------------------------------------------------


def test_previous_keys_verify_but_never_sign() -> None:
    old_token = load({"MRTR_SIGNING_KEY": HEX_B}).mint(BINDING, {"q": ANSWER}, {})
    rotated = load({"MRTR_SIGNING_KEY": HEX_A, "MRTR_PREVIOUS_SIGNING_KEYS": HEX_B})

    assert rotated.verify(old_token, BINDING).answers == {"q": ANSWER}
    assert minting_kid(rotated) == key_id(HEX_A)


def test_previous_keys_list_tolerates_spaces_and_empty_entries() -> None:
    environ = {"MRTR_SIGNING_KEY": HEX_A, "MRTR_PREVIOUS_SIGNING_KEYS": f" {HEX_B} ,, {HEX_C},  "}
    rotated = load(environ)

    for old in (HEX_B, HEX_C):
        minted = load({"MRTR_SIGNING_KEY": old}).mint(BINDING, {}, {})
        assert rotated.verify(minted, BINDING).answers == {}


def test_previous_keys_listing_the_current_key_is_harmless() -> None:
    environ = {"MRTR_SIGNING_KEY": HEX_A, "MRTR_PREVIOUS_SIGNING_KEYS": f"{HEX_A},{HEX_A}"}

    assert minting_kid(load(environ)) == key_id(HEX_A)


def test_weak_previous_key_names_its_position_not_its_value() -> None:
    environ = {"MRTR_SIGNING_KEY": HEX_A, "MRTR_PREVIOUS_SIGNING_KEYS": f"{HEX_B},abcd"}

    with pytest.raises(WeakSigningKey, match="MRTR_PREVIOUS_SIGNING_KEYS entry 2") as info:
        load(environ)
    assert "abcd" not in str(info.value)


def test_previous_keys_without_a_current_key_still_verify(tmp_path: Path) -> None:
    default = write(tmp_path / "default.key", HEX_A)
    old = load({"MRTR_SIGNING_KEY": HEX_B}).mint(BINDING, {}, {})

    assert load({"MRTR_PREVIOUS_SIGNING_KEYS": HEX_B}, default).verify(old, BINDING).answers == {}


# --- TTL ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "ttl"), [(None, 900), ("60", 60), (" 3600 ", 3600), ("", 900), ("0900", 900)]
)
def test_ttl_comes_from_the_environment_or_defaults_to_15_minutes(
    text: str | None, ttl: int
) -> None:
    environ = {"MRTR_SIGNING_KEY": HEX_A}
    if text is not None:
        environ["MRTR_STATE_TTL_SECONDS"] = text
    state_codec = load(environ)

    assert state_codec.ttl_seconds == ttl
    assert state_codec.verify(state_codec.mint(BINDING, {}, {}), BINDING).expires_at == NOW + ttl


@pytest.mark.parametrize("text", ["0", "-5", "abc", "1.5", "1e3", "٣", "99999999999"])
def test_ttl_that_is_not_a_positive_whole_number_stops_start(text: str) -> None:
    with pytest.raises(SigningConfigError, match="MRTR_STATE_TTL_SECONDS"):
        load({"MRTR_SIGNING_KEY": HEX_A, "MRTR_STATE_TTL_SECONDS": text})


@pytest.mark.parametrize("text", ["3601", "86400", "9999999999"])
def test_ttl_above_an_hour_stops_start_with_one_line(text: str) -> None:
    # 2026-07-28 basic/patterns/mrtr: a short TTL; a captured token replays until it expires.
    with pytest.raises(SigningConfigError, match="from 1 to 3600") as info:
        load({"MRTR_SIGNING_KEY": HEX_A, "MRTR_STATE_TTL_SECONDS": text})
    assert "\n" not in str(info.value)


# --- the removed plaintext switch --------------------------------------------------------------


@pytest.mark.parametrize("value", ["1", "true", "yes", "2"])
def test_the_removed_plaintext_switch_is_ignored_with_one_warning_and_tokens_stay_signed(
    value: str, logs: pytest.LogCaptureFixture
) -> None:
    state_codec = load({"MRTR_SIGNING_KEY": HEX_A, "MRTR_INSECURE_PLAINTEXT": value})

    assert state_codec.mint(BINDING, {}, {}).startswith(f"m1.{key_id(HEX_A)}.")
    unsigned = "p1." + state_codec.mint(BINDING, {}, {}).split(".")[2]
    with pytest.raises(InvalidRequestState, match="signature"):
        state_codec.verify(unsigned, BINDING)
    (warning,) = [r for r in logs.records if r.levelno >= logging.WARNING]
    assert "MRTR_INSECURE_PLAINTEXT is ignored" in warning.getMessage()
    assert "\n" not in warning.getMessage()


@pytest.mark.parametrize("value", ["0", "", "  "])
def test_the_removed_plaintext_switch_set_off_says_nothing(
    value: str, logs: pytest.LogCaptureFixture
) -> None:
    load({"MRTR_SIGNING_KEY": HEX_A, "MRTR_INSECURE_PLAINTEXT": value})

    assert not [r for r in logs.records if r.levelno >= logging.WARNING]


def test_logs_never_contain_key_material(tmp_path: Path, logs: pytest.LogCaptureFixture) -> None:
    private = write(tmp_path / "private.key", HEX_C)
    write(tmp_path / PREVIOUS_KEYS_FILE_NAME, HEX_B)
    load({"MRTR_SIGNING_KEY": HEX_A, "MRTR_PREVIOUS_SIGNING_KEYS": HEX_B})
    load({"MRTR_SIGNING_KEY_FILE": str(private)})
    load({})

    assert logs.records
    assert_no_secrets(logs.text)


# --- write_key_file ----------------------------------------------------------------------------


@posix_only
def test_written_key_file_has_mode_0600_even_with_a_permissive_umask(tmp_path: Path) -> None:
    path = tmp_path / "signing.key"
    previous = os.umask(0)
    try:
        key = write_key_file(path)
    finally:
        os.umask(previous)

    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert parse_signing_key(path.read_text()) == key


def test_written_key_file_is_found_as_the_default_without_warnings(
    tmp_path: Path, logs: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "nested" / "dir" / "signing.key"
    key = write_key_file(path)

    assert minting_kid(load({}, path)) == key.key_id
    assert not [r for r in logs.records if r.levelno >= logging.WARNING]


def test_write_key_file_refuses_to_overwrite(tmp_path: Path) -> None:
    path = write(tmp_path / "signing.key", HEX_A)

    with pytest.raises(FileExistsError):
        write_key_file(path)
    assert path.read_text() == HEX_A


@posix_only
def test_write_key_file_can_replace_a_key_atomically_when_asked(tmp_path: Path) -> None:
    path = write(tmp_path / "signing.key", HEX_A, mode=0o644)

    key = write_key_file(path, overwrite=True)

    assert parse_signing_key(path.read_text()) == key != parse_signing_key(HEX_A)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["signing.key"]


def test_two_written_key_files_never_share_a_key(tmp_path: Path) -> None:
    first = write_key_file(tmp_path / "one.key")
    second = write_key_file(tmp_path / "two.key")

    assert first.key_id != second.key_id


# --- previous keys from a file -----------------------------------------------------------------


def token_under(hex_key: str, audience: str = "srv") -> str:
    return load({"MRTR_SIGNING_KEY": hex_key}, audience=audience).mint(BINDING, {"q": ANSWER}, {})


def test_previous_keys_file_beside_the_default_key_file_is_read_by_itself(tmp_path: Path) -> None:
    default = write(tmp_path / "default.key", HEX_A)
    write(tmp_path / PREVIOUS_KEYS_FILE_NAME, f"# retired keys\n\n{HEX_B}\n  {HEX_C}  \n")

    rotated = load({}, default)

    assert minting_kid(rotated) == key_id(HEX_A)
    for old in (HEX_B, HEX_C):
        assert rotated.verify(token_under(old), BINDING).answers == {"q": ANSWER}


def test_previous_keys_file_beside_a_named_key_file_is_read_by_itself(tmp_path: Path) -> None:
    named = write(tmp_path / "named.key", HEX_A)
    write(tmp_path / PREVIOUS_KEYS_FILE_NAME, HEX_B)

    rotated = load({"MRTR_SIGNING_KEY_FILE": str(named)})

    assert rotated.verify(token_under(HEX_B), BINDING).answers == {"q": ANSWER}


def test_previous_keys_file_is_not_looked_for_when_the_key_is_inline(tmp_path: Path) -> None:
    write(tmp_path / PREVIOUS_KEYS_FILE_NAME, HEX_B)

    inline = load({"MRTR_SIGNING_KEY": HEX_A}, tmp_path / "absent.key")

    with pytest.raises(InvalidRequestState, match="unknown key"):
        inline.verify(token_under(HEX_B), BINDING)


def test_previous_keys_file_variable_adds_to_the_file_beside_the_key(tmp_path: Path) -> None:
    # keygen --rotate writes beside the key file; a variable set in a host config must not hide it.
    default = write(tmp_path / "default.key", HEX_A)
    write(tmp_path / PREVIOUS_KEYS_FILE_NAME, HEX_B)
    named = write(tmp_path / "elsewhere", HEX_C)

    rotated = load({"MRTR_PREVIOUS_SIGNING_KEYS_FILE": str(named)}, default)

    for old in (HEX_B, HEX_C):
        assert rotated.verify(token_under(old), BINDING).answers == {"q": ANSWER}


def test_previous_keys_from_the_variable_and_the_file_add_up(tmp_path: Path) -> None:
    default = write(tmp_path / "default.key", HEX_A)
    write(tmp_path / PREVIOUS_KEYS_FILE_NAME, f"{HEX_B}\n{HEX_A}\n")

    rotated = load({"MRTR_PREVIOUS_SIGNING_KEYS": HEX_C}, default)

    for old in (HEX_B, HEX_C):
        assert rotated.verify(token_under(old), BINDING).answers == {"q": ANSWER}
    assert minting_kid(rotated) == key_id(HEX_A)


def test_configured_previous_keys_file_that_is_missing_stops_start(tmp_path: Path) -> None:
    missing = tmp_path / "nope"

    with pytest.raises(WeakSigningKey, match="cannot be read") as info:
        load({"MRTR_SIGNING_KEY": HEX_A, "MRTR_PREVIOUS_SIGNING_KEYS_FILE": str(missing)})
    assert f"MRTR_PREVIOUS_SIGNING_KEYS_FILE {missing}" in str(info.value)


def test_weak_line_in_the_previous_keys_file_names_the_line_not_the_key(tmp_path: Path) -> None:
    default = write(tmp_path / "default.key", HEX_A)
    previous = write(tmp_path / PREVIOUS_KEYS_FILE_NAME, f"# header\n{HEX_B}\n{HEX_C[:40]}\n")

    with pytest.raises(WeakSigningKey, match="line 3") as info:
        load({}, default)
    assert str(previous) in str(info.value)
    assert_no_secrets(str(info.value))


@posix_only
@pytest.mark.parametrize("mode", [0o644, 0o620, 0o602])
def test_previous_keys_file_other_users_can_read_or_write_stops_start(
    tmp_path: Path, mode: int
) -> None:
    default = write(tmp_path / "default.key", HEX_A)
    previous = write(tmp_path / PREVIOUS_KEYS_FILE_NAME, HEX_B, mode=mode)

    with pytest.raises(WeakSigningKey) as info:
        load({}, default)
    assert f"chmod 600 {previous}" in str(info.value)
    assert_no_secrets(str(info.value))


# --- rotate_key_file (keygen --rotate) ---------------------------------------------------------


def file_keys(path: Path) -> list[str]:
    lines = [line.strip() for line in path.read_text().splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


@posix_only
def test_rotation_moves_the_old_key_to_a_private_previous_keys_file(tmp_path: Path) -> None:
    path = write(tmp_path / "signing.key", HEX_A)
    previous_umask = os.umask(0)
    try:
        rotation = rotate_key_file(path)
    finally:
        os.umask(previous_umask)

    previous = default_previous_keys_file(path)
    assert previous == tmp_path / PREVIOUS_KEYS_FILE_NAME == rotation.previous_file
    assert file_keys(previous) == [HEX_A]
    assert rotation.retired is not None and rotation.retired.key_id == key_id(HEX_A)
    assert parse_signing_key(path.read_text()) == rotation.current != rotation.retired
    assert stat.S_IMODE(path.stat().st_mode) == stat.S_IMODE(previous.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([path.name, previous.name])


def test_a_round_started_before_a_rotation_finishes_after_it(tmp_path: Path) -> None:
    path = write(tmp_path / "signing.key", HEX_A)
    before = load({}, path).mint(BINDING, {"q": ANSWER}, {})

    rotate_key_file(path)
    after = load({}, path)

    assert after.verify(before, BINDING).answers == {"q": ANSWER}
    assert minting_kid(after) != key_id(HEX_A)


def test_rotation_keeps_the_newest_previous_keys_first(tmp_path: Path) -> None:
    path = write(tmp_path / "signing.key", HEX_A)
    retired: list[str] = []
    for _ in range(MAX_PREVIOUS_KEYS + 2):
        retired.insert(0, path.read_text().strip())
        rotation = rotate_key_file(path)

    expected = retired[:MAX_PREVIOUS_KEYS]
    assert file_keys(rotation.previous_file) == expected
    assert [key.key_id for key in rotation.previous] == [key_id(hex_key) for hex_key in expected]


def test_rotation_without_a_key_file_just_writes_one(tmp_path: Path) -> None:
    path = tmp_path / "signing.key"

    rotation = rotate_key_file(path)

    assert rotation.retired is None and rotation.previous == ()
    assert parse_signing_key(path.read_text()) == rotation.current
    assert not rotation.previous_file.exists()


def test_rotation_writes_to_a_previous_keys_file_of_your_choice(tmp_path: Path) -> None:
    path = write(tmp_path / "signing.key", HEX_A)
    elsewhere = tmp_path / "keys" / "old"

    rotate_key_file(path, previous_file=elsewhere)

    assert file_keys(elsewhere) == [HEX_A]
    assert not (tmp_path / PREVIOUS_KEYS_FILE_NAME).exists()


@posix_only
def test_rotation_refuses_a_broken_previous_keys_file_and_changes_nothing(tmp_path: Path) -> None:
    path = write(tmp_path / "signing.key", HEX_A)
    previous = write(tmp_path / PREVIOUS_KEYS_FILE_NAME, HEX_B, mode=0o644)

    with pytest.raises(WeakSigningKey, match="chmod 600"):
        rotate_key_file(path)
    assert path.read_text() == HEX_A
    assert previous.read_text() == HEX_B


# --- the server identity (audience) ------------------------------------------------------------


def test_a_token_from_another_server_with_the_same_key_fails_the_signature() -> None:
    foreign = token_under(HEX_A, audience="server-a")

    with pytest.raises(InvalidRequestState, match="signature"):
        load({"MRTR_SIGNING_KEY": HEX_A}, audience="server-b").verify(foreign, BINDING)


def test_replicas_of_one_server_with_the_same_key_accept_each_others_tokens() -> None:
    minted = token_under(HEX_A, audience="server-a")

    replica = load({"MRTR_SIGNING_KEY": HEX_A}, audience="server-a")
    assert replica.audience == "server-a"
    assert replica.verify(minted, BINDING).answers == {"q": ANSWER}


# --- the per-user key file (an installed server: no project directory) -----------------------


def state_home(tmp_path: Path) -> dict[str, str]:
    """An environment whose home and state directory are temporary: never the real home."""
    return {"HOME": str(tmp_path / "home"), "XDG_STATE_HOME": str(tmp_path / "state")}


def info_lines(logs: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in logs.records if r.levelno == logging.INFO]


@pytest.mark.parametrize(
    ("platform", "environ", "expected"),
    [
        ("linux", {"HOME": "/home/ada", "XDG_STATE_HOME": "/xdg/state"}, "/xdg/state"),
        ("linux", {"HOME": "/home/ada"}, "/home/ada/.local/state"),
        # XDG Base Directory Specification: a relative path is invalid and is ignored.
        ("linux", {"HOME": "/home/ada", "XDG_STATE_HOME": "state"}, "/home/ada/.local/state"),
        ("linux", {"HOME": "/home/ada", "XDG_STATE_HOME": " "}, "/home/ada/.local/state"),
        ("freebsd14", {"HOME": "/home/ada"}, "/home/ada/.local/state"),
        ("darwin", {"HOME": "/Users/ada"}, "/Users/ada/Library/Application Support"),
        (
            "darwin",
            {"HOME": "/Users/ada", "XDG_STATE_HOME": "/x"},
            "/Users/ada/Library/Application Support",
        ),
        (
            "win32",
            {"LOCALAPPDATA": "C:\\Users\\ada\\AppData\\Local"},
            "C:\\Users\\ada\\AppData\\Local",
        ),
        ("win32", {"USERPROFILE": "C:\\Users\\ada"}, "C:\\Users\\ada/AppData/Local"),
    ],
)
def test_the_per_user_key_lives_in_the_platforms_state_directory(
    platform: str, environ: dict[str, str], expected: str
) -> None:
    path = per_user_key_path("demo-server", environ, platform=platform)

    assert path == Path(expected) / "demo-server" / ".mrtr-signing-key"


@pytest.mark.parametrize(
    ("platform", "environ"),
    [
        ("linux", {}),
        ("linux", {"HOME": "relative"}),
        ("darwin", {"XDG_STATE_HOME": "/xdg"}),
        ("win32", {"HOME": "C:\\Users\\ada", "LOCALAPPDATA": "AppData"}),
    ],
)
def test_without_a_home_there_is_no_per_user_key_file(
    platform: str, environ: dict[str, str]
) -> None:
    assert per_user_key_path("demo-server", environ, platform=platform) is None


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "a\\b", "c:", "nul\0"])
def test_a_server_name_that_cannot_be_one_directory_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="cannot name a directory"):
        per_user_key_path(name, {"HOME": "/home/ada"}, platform="linux")


@pytest.mark.parametrize(
    ("environ", "winner"),
    [
        ({"MRTR_SIGNING_KEY": HEX_A}, HEX_A),
        ({"MRTR_SIGNING_KEY_FILE": "named"}, HEX_B),
        ({}, HEX_C),
    ],
)
def test_environment_and_project_key_file_come_before_the_per_user_file(
    tmp_path: Path, environ: dict[str, str], winner: str
) -> None:
    if "MRTR_SIGNING_KEY_FILE" in environ:
        environ = {"MRTR_SIGNING_KEY_FILE": str(write(tmp_path / "named", HEX_B))}
    project = write(tmp_path / "project.key", HEX_C)
    per_user = tmp_path / "state" / "srv" / ".mrtr-signing-key"

    state_codec = load(environ, project, per_user_key_file=per_user)

    assert minting_kid(state_codec) == key_id(winner)
    assert not per_user.parent.exists()  # never created when another key is configured


@posix_only
def test_the_per_user_key_file_is_created_private_on_first_start_and_read_after(
    tmp_path: Path, logs: pytest.LogCaptureFixture
) -> None:
    per_user = per_user_key_path("srv", state_home(tmp_path))
    assert per_user is not None
    umask = os.umask(0)
    try:
        first = load({}, tmp_path / "no-project.key", per_user_key_file=per_user)
    finally:
        os.umask(umask)

    assert stat.S_IMODE(per_user.stat().st_mode) == 0o600
    assert stat.S_IMODE(per_user.parent.stat().st_mode) == 0o700
    assert [path.name for path in per_user.parent.iterdir()] == [".mrtr-signing-key"]
    key = parse_signing_key(per_user.read_text())
    assert minting_kid(first) == key.key_id
    assert not [r for r in logs.records if r.levelno >= logging.WARNING]
    # One stderr line says where the key is, and that it is new.
    (created,) = [line for line in info_lines(logs) if str(per_user) in line]
    assert "(new, mode 0600)" in created and key.key_id in created
    logs.clear()

    # A restart reads the same key, so a round begun before it finishes after it.
    minted = first.mint(BINDING, {"q": ANSWER}, {"q": "elicitation/create"})
    second = load({}, None, per_user_key_file=per_user)
    assert second.verify(minted, BINDING).answers == {"q": ANSWER}
    (again,) = [line for line in info_lines(logs) if str(per_user) in line]
    assert "new" not in again
    assert_no_secrets(per_user.read_text() + "".join(info_lines(logs)))


def test_the_per_user_key_file_is_rotated_like_any_key_file(tmp_path: Path) -> None:
    per_user = tmp_path / "state" / "srv" / ".mrtr-signing-key"
    before = load({}, None, per_user_key_file=per_user)
    minted = before.mint(BINDING, {"q": ANSWER}, {"q": "elicitation/create"})

    rotation = rotate_key_file(per_user)
    after = load({}, None, per_user_key_file=per_user)

    assert minting_kid(after) == rotation.current.key_id != minting_kid(before)
    assert rotation.previous_file == per_user.parent / PREVIOUS_KEYS_FILE_NAME
    assert after.verify(minted, BINDING).answers == {"q": ANSWER}


@posix_only
def test_a_per_user_key_file_other_users_can_read_stops_start(tmp_path: Path) -> None:
    per_user = tmp_path / "state" / "srv" / ".mrtr-signing-key"
    per_user.parent.mkdir(parents=True, mode=0o700)
    write(per_user, HEX_A, mode=0o644)

    with pytest.raises(WeakSigningKey, match=r"per-user key file .* readable or writable by other"):
        load({}, None, per_user_key_file=per_user)
    assert per_user.read_text() == HEX_A


def test_a_per_user_key_file_that_cannot_be_created_falls_back_to_a_process_key_with_a_warning(
    tmp_path: Path, logs: pytest.LogCaptureFixture
) -> None:
    blocker = write(tmp_path / "state", "a file where the state directory should be")
    per_user = blocker / "srv" / ".mrtr-signing-key"

    first = load({}, None, per_user_key_file=per_user)
    second = load({}, None, per_user_key_file=per_user)

    assert minting_kid(first) != minting_kid(second)  # a key for each process
    warnings = [r.getMessage() for r in logs.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    assert f"cannot create {per_user}" in warnings[0] and "restart" in warnings[0]


RACER = """\
import importlib
import os
import sys
import time
from pathlib import Path

config = importlib.import_module(os.environ["MRTR_PACKAGE"] + ".mrtr_runtime._config")
print("ready", flush=True)
go = Path(sys.argv[2])
while not go.exists():
    time.sleep(0.001)
key, created = config.load_or_create_key_file(Path(sys.argv[1]))
print(key.key_id, created)
"""


def test_servers_starting_together_end_with_one_per_user_key(tmp_path: Path) -> None:
    # Two servers starting at once, ten times over: twenty processes race to create the file.
    script = write(tmp_path / "racer.py", RACER)
    go = tmp_path / "go"
    env = {**os.environ, "MRTR_PACKAGE": PACKAGE}
    per_user = tmp_path / "state" / "srv" / ".mrtr-signing-key"
    racers = [
        subprocess.Popen(
            [sys.executable, str(script), str(per_user), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(20)
    ]
    # All of them loaded and waiting, then all at once.
    assert [racer.stdout.readline() for racer in racers if racer.stdout] == ["ready\n"] * 20
    go.touch()
    results = []
    for racer in racers:
        out, err = racer.communicate(timeout=60)
        assert racer.returncode == 0, err
        results.append(out.split())

    assert {kid for kid, _ in results} == {parse_signing_key(per_user.read_text()).key_id}
    assert sorted(created for _, created in results) == ["False"] * 19 + ["True"]
    assert [path.name for path in per_user.parent.iterdir()] == [".mrtr-signing-key"]


def test_an_existing_per_user_key_file_is_read_not_replaced(tmp_path: Path) -> None:
    per_user = tmp_path / "srv" / ".mrtr-signing-key"
    per_user.parent.mkdir(mode=0o700)
    write(per_user, HEX_A)

    key, created = load_or_create_key_file(per_user)

    assert (key.key_id, created) == (key_id(HEX_A), False)
    assert per_user.read_text() == HEX_A


# --- key files are trusted only when they are ours -------------------------------------------

#: Every file a key is read from, by the label its refusal names.
KEY_FILE_KINDS = [
    "MRTR_SIGNING_KEY_FILE",
    "key file",
    "previous keys file",
    PREVIOUS_KEYS_FILE_ENV,
    "per-user key file",
]
as_root = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0,
    reason="only root can give a file to another user (uid 65534) to test with",
)
NOBODY = 65534
#: The uid the server is made to run as when a test cannot chown: a user no system has.
STRANGER = 4_000_000_000


def key_file_of(kind: str, tmp_path: Path) -> tuple[Path, Callable[[], RequestStateCodec]]:
    """Where a key file of this kind lives (not yet written), and the start-up that reads it."""
    home = tmp_path / "keys"
    home.mkdir(mode=0o700)
    if kind == "MRTR_SIGNING_KEY_FILE":
        named = home / "named.key"
        return named, lambda: load({"MRTR_SIGNING_KEY_FILE": str(named)})
    if kind == "key file":
        project = home / ".mrtr-signing-key"
        return project, lambda: load({}, project)
    if kind == "previous keys file":
        current = write(home / ".mrtr-signing-key", HEX_B)
        return home / PREVIOUS_KEYS_FILE_NAME, lambda: load({}, current)
    if kind == PREVIOUS_KEYS_FILE_ENV:
        listed = home / "previous.keys"
        return listed, lambda: load(
            {"MRTR_SIGNING_KEY": HEX_B, PREVIOUS_KEYS_FILE_ENV: str(listed)}
        )
    per_user = home / "srv" / ".mrtr-signing-key"
    per_user.parent.mkdir(mode=0o700)
    return per_user, lambda: load({}, None, per_user_key_file=per_user)


@posix_only
@pytest.mark.parametrize("kind", KEY_FILE_KINDS)
def test_a_key_file_that_is_a_symlink_is_refused_not_followed(
    tmp_path: Path, logs: pytest.LogCaptureFixture, kind: str
) -> None:
    # The link's target is a perfectly good key file of ours: what is refused is the link,
    # which whoever controls it (or the directory it points into) can re-point.
    path, start = key_file_of(kind, tmp_path)
    target = write(tmp_path / "target.key", HEX_A)
    path.symlink_to(target)

    with pytest.raises(WeakSigningKey) as info:
        start()
    message = str(info.value)
    assert message.startswith(f"{kind} {path} is a symlink")
    assert "replace the symlink with the file it points to" in message
    assert "\n" not in message
    assert target.read_text() == HEX_A
    assert_no_secrets(message + logs.text)


@posix_only
def test_a_dangling_symlink_in_the_projects_key_place_is_refused_not_skipped(
    tmp_path: Path,
) -> None:
    # Taking it for "no project key" would silently sign with the per-user key instead.
    project = tmp_path / ".mrtr-signing-key"
    project.symlink_to(tmp_path / "gone.key")
    per_user = tmp_path / "state" / "srv" / ".mrtr-signing-key"

    with pytest.raises(WeakSigningKey, match=r"^key file .* is a symlink"):
        load({}, project, per_user_key_file=per_user)
    assert not per_user.parent.exists()


@posix_only
@as_root
@pytest.mark.parametrize("kind", KEY_FILE_KINDS)
def test_a_key_file_another_user_owns_is_refused_even_by_root(
    tmp_path: Path, logs: pytest.LogCaptureFixture, kind: str
) -> None:
    # 0600 and a good key, but its owner can rewrite it and so mint any requestState we accept.
    path, start = key_file_of(kind, tmp_path)
    write(path, HEX_A)
    os.chown(path, NOBODY, NOBODY)

    with pytest.raises(WeakSigningKey) as info:
        start()
    message = str(info.value)
    assert message.startswith(f"{kind} {path} is owned by uid {NOBODY}")
    assert f"run: chown root {path}" in message
    assert "\n" not in message
    assert_no_secrets(message + logs.text)


@posix_only
# The kinds whose start-up reads no other file (the per-user key's directory is checked first).
@pytest.mark.parametrize("kind", ["MRTR_SIGNING_KEY_FILE", "key file", PREVIOUS_KEYS_FILE_ENV])
def test_a_key_file_owned_by_a_uid_other_than_the_servers_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    # Without root, the server is made to run as a uid nobody has: the file is then not its own.
    path, start = key_file_of(kind, tmp_path)
    write(path, HEX_A)
    owner = path.stat().st_uid
    monkeypatch.setattr(os, "geteuid", lambda: STRANGER)

    with pytest.raises(WeakSigningKey) as info:
        start()
    assert str(info.value).startswith(
        f"{kind} {path} is owned by uid {owner}, not by the user this server runs as "
        f"(uid {STRANGER}); if its content is trusted, run: chown {STRANGER} {path}"
    )


@posix_only
@pytest.mark.parametrize("mode", [0o777, 0o770, 0o707, 0o750, 0o705, 0o701, 0o710])
def test_a_per_user_key_directory_open_to_other_users_is_refused_and_left_alone(
    tmp_path: Path, mode: int
) -> None:
    per_user = tmp_path / "state" / "srv" / ".mrtr-signing-key"
    per_user.parent.mkdir(parents=True)
    per_user.parent.chmod(mode)

    with pytest.raises(WeakSigningKey) as info:
        load({}, None, per_user_key_file=per_user)
    message = str(info.value)
    assert message.startswith(f"per-user key directory {per_user.parent} is open to other users")
    assert oct(mode) in message
    assert message.endswith(f"run: chmod 700 {per_user.parent}")
    # Refused, not repaired: we did not create it, so we do not chmod it, nor write in it.
    assert stat.S_IMODE(per_user.parent.stat().st_mode) == mode
    assert list(per_user.parent.iterdir()) == []


@posix_only
def test_a_per_user_key_directory_owned_by_another_uid_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    per_user = tmp_path / "srv" / ".mrtr-signing-key"
    per_user.parent.mkdir(mode=0o700)
    owner = per_user.parent.stat().st_uid
    monkeypatch.setattr(os, "geteuid", lambda: STRANGER)

    with pytest.raises(WeakSigningKey) as info:
        load({}, None, per_user_key_file=per_user)
    assert str(info.value).startswith(
        f"per-user key directory {per_user.parent} is owned by uid {owner}"
    )
    assert f"chown {STRANGER} {per_user.parent}" in str(info.value)  # no such user: a number
    assert list(per_user.parent.iterdir()) == []


@posix_only
@as_root
def test_a_per_user_key_directory_another_user_owns_is_refused_even_by_root(
    tmp_path: Path,
) -> None:
    per_user = tmp_path / "srv" / ".mrtr-signing-key"
    per_user.parent.mkdir(mode=0o700)
    os.chown(per_user.parent, NOBODY, NOBODY)

    with pytest.raises(WeakSigningKey, match=rf"is owned by uid {NOBODY}.*run: chown root"):
        load({}, None, per_user_key_file=per_user)
    assert list(per_user.parent.iterdir()) == []


@posix_only
def test_a_per_user_key_directory_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    # A private directory of ours behind the link, even: the link itself can be re-pointed.
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    write(real / ".mrtr-signing-key", HEX_A)
    (tmp_path / "srv").symlink_to(real)
    per_user = tmp_path / "srv" / ".mrtr-signing-key"

    with pytest.raises(WeakSigningKey) as info:
        load({}, None, per_user_key_file=per_user)
    assert str(info.value) == (
        f"per-user key directory {per_user.parent} is a symlink, which can be re-pointed at a "
        f"key of someone else's; replace the symlink with a directory: rm {per_user.parent} && "
        f"mkdir -m 700 {per_user.parent}"
    )


@posix_only
def test_a_symlink_above_the_per_user_key_directory_is_not_its_business(tmp_path: Path) -> None:
    # Homes are often reached through a link (/home -> /usr/home on FreeBSD); only the
    # server's own directory and its files are checked.
    (tmp_path / "real-state").mkdir()
    (tmp_path / "state").symlink_to(tmp_path / "real-state")
    per_user = tmp_path / "state" / "srv" / ".mrtr-signing-key"

    first = load({}, None, per_user_key_file=per_user)

    assert minting_kid(first) == parse_signing_key(per_user.read_text()).key_id
    assert stat.S_IMODE((tmp_path / "real-state" / "srv").stat().st_mode) == 0o700


@posix_only
def test_without_posix_owners_the_owner_and_directory_checks_do_not_apply(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Windows has no os.geteuid and no POSIX owners: there the per-user key works as before.
    per_user = tmp_path / "srv" / ".mrtr-signing-key"
    per_user.parent.mkdir(mode=0o700)
    per_user.parent.chmod(0o777)
    write(per_user, HEX_A)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        os.chown(per_user, NOBODY, NOBODY)
    monkeypatch.delattr(os, "geteuid")

    assert minting_kid(load({}, None, per_user_key_file=per_user)) == key_id(HEX_A)
    assert stat.S_IMODE(per_user.parent.stat().st_mode) == 0o777


@posix_only
def test_a_server_given_a_symlinked_key_file_exits_2_with_one_line(tmp_path: Path) -> None:
    target = write(tmp_path / "target.key", HEX_A)
    link = tmp_path / "link.key"
    link.symlink_to(target)
    env = {name: value for name, value in os.environ.items() if not name.startswith("MRTR_")}
    env["MRTR_SIGNING_KEY_FILE"] = str(link)

    result = subprocess.run(
        [sys.executable, "-m", PACKAGE],
        input=b"",
        capture_output=True,
        env=env,
        timeout=60,
        check=False,
    )

    stderr = result.stderr.decode()
    assert result.returncode == 2, stderr
    assert result.stdout == b""
    assert "Traceback" not in stderr
    (line,) = [line for line in stderr.splitlines() if "cannot start" in line]
    assert line.endswith(
        f"cannot start: MRTR_SIGNING_KEY_FILE {link} is a symlink, which can be re-pointed at "
        "a key of someone else's; replace the symlink with the file it points to"
    )


# --- what docs/keys.md promises ----------------------------------------------------------------


def test_the_keys_page_states_the_lifetime_and_rotation_the_code_implements() -> None:
    readme = (PROJECT / "docs" / "keys.md").read_text(encoding="utf-8")

    assert f"{DEFAULT_TTL_SECONDS} s (15 minutes) by default" in readme
    assert f"{MAX_TTL_SECONDS} s at most" in readme
    assert "keygen --rotate" in readme
    assert PREVIOUS_KEYS_FILE_NAME in readme
    assert f"at most {MAX_PREVIOUS_KEYS} keys" in readme


def test_the_keys_page_states_where_the_per_user_key_lives(
    tmp_path: Path, logs: pytest.LogCaptureFixture
) -> None:
    readme = (PROJECT / "docs" / "keys.md").read_text(encoding="utf-8")
    name = importlib.import_module(f"{PACKAGE}.app").PROJECT.name
    for platform, spelled in [
        ("linux", "~/.local/state/"),
        ("darwin", "~/Library/Application Support/"),
    ]:
        path = per_user_key_path(name, {"HOME": "/home/you"}, platform=platform)
        assert str(path).replace("/home/you/", "~/") == f"{spelled}{name}/.mrtr-signing-key"
        assert f"`{spelled}{name}/.mrtr-signing-key`" in readme
    assert f"`$XDG_STATE_HOME/{name}/.mrtr-signing-key`" in readme
    assert f"`%LOCALAPPDATA%\\{name}\\.mrtr-signing-key`" in readme
    # The stderr line the page quotes is the line the server writes.
    per_user = tmp_path / name / ".mrtr-signing-key"
    load({}, None, per_user_key_file=per_user)
    (line,) = [line for line in info_lines(logs) if str(per_user) in line]
    quoted = line.replace(str(per_user), f"/home/you/.local/state/{name}/.mrtr-signing-key")
    key = parse_signing_key(per_user.read_text()).key_id
    assert f"`{quoted.replace(key, '1a2b3c4d')}`" in readme
