"""Settings: every MRTR_* variable read once, in one place (`_config.Settings.from_environment`),
and handed down; a value that makes no sense is named, never silently taken."""

from __future__ import annotations

import re
import secrets
from pathlib import Path

import pytest

import mrtr_runtime
from mrtr_runtime._config import Settings, codec_from_settings, shown_store_url
from mrtr_runtime.server import SigningConfigError

RUNTIME = Path(mrtr_runtime.__file__).parent
#: The one module that reads its MRTR_* variables itself: the artifact rule, which the build
#: hook loads by path, standard library only, with no runtime to import.
OWN_READERS = {"cli/_artifacts.py"}

#: A valid value for each variable, distinct from its default.
VALID = {
    "MRTR_LOG_LEVEL": ("debug", "log_level", "DEBUG"),
    "MRTR_CLIENT_REQUEST_TIMEOUT_SECONDS": ("2.5", "client_request_timeout", 2.5),
    "MRTR_SIGNING_KEY": ("ab" * 32, "signing_key", "ab" * 32),
    "MRTR_SIGNING_KEY_FILE": ("~/key", "signing_key_file", Path("~/key").expanduser()),
    "MRTR_PREVIOUS_SIGNING_KEYS": ("cd" * 32, "previous_signing_keys", "cd" * 32),
    "MRTR_PREVIOUS_SIGNING_KEYS_FILE": ("/k", "previous_signing_keys_file", Path("/k")),
    "MRTR_STATE_TTL_SECONDS": ("60", "state_ttl_seconds", 60),
    "MRTR_HTTP_TOKEN": (" t0ken ", "http_token", "t0ken"),
    "MRTR_HTTP_TOKENS_FILE": ("/tokens", "http_tokens_file", "/tokens"),
    "MRTR_HTTP_ALLOWED_ORIGINS": (
        "https://a, https://b,",
        "http_allowed_origins",
        ("https://a", "https://b"),
    ),
    "MRTR_HTTP_ALLOWED_HOSTS": ("a,b", "http_allowed_hosts", ("a", "b")),
    "MRTR_HTTP_MAX_CONNECTIONS": (" 64 ", "http_max_connections", 64),
    "MRTR_HTTP_MAX_SESSIONS": (" 5 ", "http_max_sessions", 5),
    "MRTR_HTTP_SESSION_IDLE_SECONDS": ("60", "http_session_idle_seconds", 60),
    "MRTR_HTTP_SSE_POLL_SECONDS": (" 30 ", "http_sse_poll_seconds", 30),
    "MRTR_OAUTH_ISSUER": (" https://auth.example.com ", "oauth_issuer", "https://auth.example.com"),
    "MRTR_OAUTH_RESOURCE": (
        "https://mcp.example.com/mcp",
        "oauth_resource",
        "https://mcp.example.com/mcp",
    ),
    "MRTR_OAUTH_SCOPES": ("mcp, tools deploy", "oauth_scopes", ("mcp", "tools", "deploy")),
    "MRTR_HTTP_RATE_PER_PRINCIPAL": ("20", "http_rate_per_principal", 20),
    "MRTR_HTTP_CALLS_PER_PRINCIPAL": ("4", "http_calls_per_principal", 4),
    "MRTR_OAUTH_ACCEPT_PLAIN_JWT": ("1", "oauth_accept_plain_jwt", True),
    "MRTR_OAUTH_CLIENT_ID": (" mcp-server ", "oauth_client_id", "mcp-server"),
    "MRTR_OAUTH_CLIENT_SECRET": ("s3cret", "oauth_client_secret", "s3cret"),
    "MRTR_OAUTH_INTROSPECTION_CACHE_SECONDS": ("0", "oauth_introspection_cache_seconds", 0),
    "MRTR_AUDIT_LOG": (" /var/log/mcp-audit.jsonl ", "audit_log", "/var/log/mcp-audit.jsonl"),
    "MRTR_HTTP_MAX_SESSIONS_PER_PRINCIPAL": ("25", "http_max_sessions_per_principal", 25),
    "MRTR_TASK_MAX_BYTES_PER_OWNER": ("1000000", "task_max_bytes_per_owner", 1_000_000),
    "MRTR_TASK_MAX_ROUND_BYTES_PER_OWNER": (
        "4096",
        "task_max_round_bytes_per_owner",
        4096,
    ),
    "MRTR_TASK_STORE": ("sqlite:///srv/tasks.db", "task_store", "sqlite:///srv/tasks.db"),
    "MRTR_TASK_MAX_STORED": ("500", "task_max_stored", 500),
    "MRTR_TASK_MAX_PER_OWNER": ("50", "task_max_per_owner", 50),
}


def runtime_variables() -> set[str]:
    names: set[str] = set()
    for path in RUNTIME.rglob("*.py"):
        names |= set(re.findall(r"\bMRTR_[A-Z_]*[A-Z]\b", path.read_text(encoding="utf-8")))
    return names


#: Named by the runtime only to say it is ignored (the unsigned mode was removed in 0.5.0).
REMOVED = {"MRTR_INSECURE_PLAINTEXT"}


def test_every_variable_the_runtime_names_is_a_setting() -> None:
    assert runtime_variables() <= set(VALID) | REMOVED, "an MRTR_* variable Settings does not read"


def test_the_removed_plaintext_switch_is_named_as_ignored() -> None:
    problems = Settings.from_environment({"MRTR_INSECURE_PLAINTEXT": "1"}).problems
    assert "is ignored" in problems["MRTR_INSECURE_PLAINTEXT"]
    assert Settings.from_environment({"MRTR_INSECURE_PLAINTEXT": "0"}).problems == {}


@pytest.mark.parametrize("name", sorted(VALID))
def test_each_variable_sets_its_field(name: str) -> None:
    value, field, expected = VALID[name]
    settings = Settings.from_environment({name: value})
    assert getattr(settings, field) == expected
    assert getattr(Settings(), field) != expected
    assert settings.problems == {}


def test_only_the_settings_read_the_environment() -> None:
    sources = {path: path.read_text(encoding="utf-8") for path in RUNTIME.rglob("*.py")}
    # The names the runtime gives its MRTR_* variables (`ENV_TOKEN: Final = "MRTR_HTTP_TOKEN"`).
    constants = {
        name
        for text in sources.values()
        for name in re.findall(r"^\s*([A-Z_]+)(?:: Final)? = [\"']MRTR_", text, re.MULTILINE)
    }
    named = "|".join(sorted(constants))
    read = re.compile(rf"environ(\.get)?[\[(]\s*([\"']MRTR_|({named})\b)")
    readers = {
        path.relative_to(RUNTIME).as_posix() for path, text in sources.items() if read.search(text)
    }
    assert readers <= {"_config.py"} | OWN_READERS


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("MRTR_CLIENT_REQUEST_TIMEOUT_SECONDS", "soon"),
        ("MRTR_STATE_TTL_SECONDS", "3601"),
        ("MRTR_HTTP_TOKEN", "  "),
        ("MRTR_HTTP_TOKEN", "t\u00f6ken"),
        ("MRTR_HTTP_MAX_CONNECTIONS", "0"),
        ("MRTR_HTTP_MAX_SESSIONS", "0"),
        ("MRTR_HTTP_SESSION_IDLE_SECONDS", "an hour"),
        # 2025-11-25 "Sending Messages" 6.: a poll bound of 0 would close every stream at once.
        ("MRTR_HTTP_SSE_POLL_SECONDS", "0"),
        ("MRTR_HTTP_MAX_SESSIONS_PER_PRINCIPAL", "0"),
        ("MRTR_HTTP_MAX_SESSIONS_PER_PRINCIPAL", "a quarter"),
        ("MRTR_HTTP_SSE_POLL_SECONDS", "0.5"),
        ("MRTR_OAUTH_INTROSPECTION_CACHE_SECONDS", "3601"),
        ("MRTR_OAUTH_INTROSPECTION_CACHE_SECONDS", "a minute"),
    ],
)
def test_a_value_that_makes_no_sense_is_named_and_the_default_kept(name: str, value: str) -> None:
    settings = Settings.from_environment({name: value})
    assert name in settings.problems[name]
    with pytest.raises(ValueError, match=name):
        settings.refuse(name)
    settings.refuse("MRTR_LOG_LEVEL")  # only the variables asked about


def test_an_unknown_log_level_is_info() -> None:
    assert Settings.from_environment({"MRTR_LOG_LEVEL": "chatty"}).log_level == "INFO"


def test_secrets_never_appear_in_the_repr() -> None:
    settings = Settings.from_environment(
        {
            "MRTR_SIGNING_KEY": "ab" * 32,
            "MRTR_PREVIOUS_SIGNING_KEYS": "cd" * 32,
            "MRTR_HTTP_TOKEN": "s3cret-t0ken",
            "MRTR_OAUTH_CLIENT_SECRET": "client-secr3t",
        }
    )
    shown = repr(settings)
    assert "ab" * 32 not in shown and "cd" * 32 not in shown and "s3cret" not in shown
    assert "secr3t" not in shown


def test_the_codec_refuses_a_ttl_the_settings_refused() -> None:
    settings = Settings.from_environment({"MRTR_STATE_TTL_SECONDS": "forever"})
    with pytest.raises(SigningConfigError, match="MRTR_STATE_TTL_SECONDS"):
        codec_from_settings(settings, default_key_file=None)


def test_the_codec_takes_its_key_and_ttl_from_the_settings() -> None:
    settings = Settings(signing_key=secrets.token_hex(32), state_ttl_seconds=60)
    codec = codec_from_settings(settings, default_key_file=None)
    assert codec.ttl_seconds == 60


def test_a_store_password_never_shows_whatever_characters_it_holds() -> None:
    for password in ("Ab3/xyzSECRET+q=", "p?a#s@s", "plain"):
        url = f"redis://user:{password}@db.example:6379/0"
        shown = shown_store_url(url)
        assert password not in shown and "SECRET" not in shown, shown
        problems = Settings.from_environment({"MRTR_TASK_STORE": url}).problems
        assert all(password not in text for text in problems.values()), problems
