"""The consent audit trail: one JSON line per question asked, per decision on it, per round
answered again from its record, and per task that ended (`MRTR_AUDIT_LOG`: a file, or
`stderr`; never stdout, which is the stdio wire).

A line says who (the principal the transport names; none over stdio), which tool, which round
(the first 16 hex digits of the sha256 of the round's requestState: the same id on the round
that asked and on the round that answered, so the two join), and what: the question's digest
(`plan`: the sha256 of the request as the user was shown it, so a yes can be matched to
exactly what it was a yes to), the decision (`accepted`, `declined`, `cancelled`, `answered`
for a sampling or roots reply, `replayed-from-record` for a sending answered from the single-use
record), what came of the round, and how a task ended. It never holds an answer's content (a
form's values, a secret a user typed): decisions only.

Standard library and the runtime's root error only: `_once`, the eras and the task engine call
it; it imports none of them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, TextIO

from ._errors import MrtrError

__all__ = (
    "AUDIT_LOG_VARIABLE",
    "AuditTrail",
    "AuditTrailError",
    "decision_of",
    "plan_digest",
    "round_id",
)

AUDIT_LOG_VARIABLE: Final = "MRTR_AUDIT_LOG"
#: A write that fails is reported at most this often (the trail must not flood the log).
_REPORT_EVERY_SECONDS: Final = 60.0
_DECISIONS: Final = {"accept": "accepted", "decline": "declined", "cancel": "cancelled"}

_logger = logging.getLogger("mrtr_runtime")


class AuditTrailError(MrtrError, ValueError):
    """`MRTR_AUDIT_LOG` names a file that cannot be the trail; the message says why. A server
    does not start with a trail it cannot keep: consents would go unrecorded."""


def round_id(request_state: str) -> str:
    """The id a round has in the trail: 16 hex digits of the sha256 of its requestState."""
    return hashlib.sha256(request_state.encode("utf-8")).hexdigest()[:16]


def plan_digest(method: str, params: Mapping[str, Any]) -> str:
    """The sha256 of a question as it was put to the client (its method and params, without
    `_meta`), over canonical JSON."""
    shown = {key: value for key, value in params.items() if key != "_meta"}
    text = json.dumps({"method": method, "params": shown}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def decision_of(method: str, answer: object) -> str:
    """What the user decided, from an answer's shape alone (never its content)."""
    if method == "elicitation/create" and isinstance(answer, Mapping):
        return _DECISIONS.get(str(answer.get("action")), "answered")
    return "answered"


class AuditTrail:
    """Writes the trail's lines with `write` (one whole line per call). `open_target` makes
    one for `MRTR_AUDIT_LOG`'s value."""

    def __init__(self, write: Callable[[str], None], *, clock: Callable[[], float] = time.time):
        self._write = write
        self._clock = clock
        self._reported_at: float | None = None

    @classmethod
    def open_target(cls, target: str) -> AuditTrail | None:
        """`stderr`, a file path (appended to, created owner-only), or "" for no trail.
        AuditTrailError when the file cannot be created or appended to, is a symbolic link or
        not a regular file, or others may read or write it. Later, a line that cannot be
        written (a full disk) is reported on stderr, at most once a minute."""
        if not target:
            return None
        if target == "stderr":
            return cls(_stream_writer(sys.stderr))
        path = os.path.expanduser(target)
        _check_file(path)
        return cls(_file_writer(path))

    def _emit(self, event: str, fields: Mapping[str, Any]) -> None:
        line = {"time": _timestamp(self._clock()), "event": event}
        line.update({key: value for key, value in fields.items() if value is not None})
        try:
            self._write(json.dumps(line, separators=(",", ":"), ensure_ascii=False) + "\n")
        except (OSError, ValueError) as error:
            now = self._clock()
            if self._reported_at is None or now - self._reported_at >= _REPORT_EVERY_SECONDS:
                self._reported_at = now
                _logger.error(
                    "the audit trail (%s) cannot be written: %s", AUDIT_LOG_VARIABLE, error
                )

    def asked(
        self,
        *,
        era: str,
        principal: str | None,
        tool: str,
        round: str | None,
        questions: Mapping[str, tuple[str, Mapping[str, Any]]],
        task: str | None = None,
    ) -> None:
        """A round asked `questions` (key -> (method, params)); `round` is the id of the
        requestState it minted, or of the 2025-11-25 call; `task` the task that asks (its
        answers come by tasks/update)."""
        self._emit(
            "asked",
            {
                "era": era,
                "principal": principal,
                "tool": tool,
                "round": round,
                "task": task,
                "questions": {
                    key: {"method": method, "plan": plan_digest(method, params)}
                    for key, (method, params) in questions.items()
                },
            },
        )

    def decided(
        self,
        *,
        era: str,
        principal: str | None,
        tool: str,
        round: str | None,
        decisions: Mapping[str, str],
        plans: Mapping[str, str] | None = None,
        task: str | None = None,
    ) -> None:
        """The answers a round acts on, as decisions by key (`decision_of`); `plans` the
        digests of what was asked, where this request knows them (2025-11-25); `task` the
        task whose questions they answer (tasks/update)."""
        self._emit(
            "decided",
            {
                "era": era,
                "principal": principal,
                "tool": tool,
                "round": round,
                "task": task,
                "decisions": dict(decisions),
                "plans": dict(plans) if plans else None,
            },
        )

    def replayed(self, *, principal: str | None, tool: str, round: str) -> None:
        """A round sent again was answered from its single-use record: nothing ran."""
        self._emit(
            "decided",
            {
                "era": "2026-07-28",
                "principal": principal,
                "tool": tool,
                "round": round,
                "decision": "replayed-from-record",
            },
        )

    def finished(
        self,
        *,
        era: str,
        principal: str | None,
        tool: str,
        round: str | None,
        result: Mapping[str, Any],
    ) -> None:
        """What came of a round that acted on decisions: complete, an error, asked again, or
        the task it became."""
        kind = result.get("resultType")
        outcome = (
            "task"
            if kind == "task"
            else "asked-again"
            if kind == "input_required"
            else "error"
            if result.get("isError") is True
            else "complete"
        )
        task = result.get("taskId") if kind == "task" else None
        self._emit(
            "finished",
            {
                "era": era,
                "principal": principal,
                "tool": tool,
                "round": round,
                "outcome": outcome,
                "task": task,
            },
        )

    def task_ended(self, *, task: str, tool: str, status: str, message: str | None) -> None:
        """A task reached its final status (completed, failed, cancelled)."""
        self._emit("task", {"task": task, "tool": tool, "status": status, "message": message})


def _timestamp(seconds: float) -> str:
    return (
        time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
        + f".{int(seconds % 1 * 1000):03d}Z"
    )


def _stream_writer(stream: TextIO) -> Callable[[str], None]:
    def write(line: str) -> None:
        stream.write(line)
        stream.flush()

    return write


_OPEN_FLAGS: Final = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)


def _check_file(path: str) -> None:
    """The trail's file can be appended to, and is its owner's alone (the trail names who
    decided what); made now, owner-only, when it does not exist."""
    try:
        fd = os.open(path, _OPEN_FLAGS, 0o600)
    except OSError as error:
        reason = "it is a symbolic link" if os.path.islink(path) else error.strerror
        raise AuditTrailError(
            f"{AUDIT_LOG_VARIABLE} {path} cannot be the audit trail: {reason}"
        ) from None
    try:
        info = os.fstat(fd)
    finally:
        os.close(fd)
    if not stat.S_ISREG(info.st_mode):
        raise AuditTrailError(f"{AUDIT_LOG_VARIABLE} {path} is not a regular file")
    if os.name == "posix" and stat.S_IMODE(info.st_mode) & 0o077:
        raise AuditTrailError(f"{AUDIT_LOG_VARIABLE} {path} is open to other users; chmod 600 it")


def _file_writer(path: str) -> Callable[[str], None]:
    """Appends each line with its own open and close: lines are few (a consent, a task's end),
    a log rotated away (`logrotate` moving the file) is followed by a new file at once, and the
    file is created owner-only (0600), as the trail names who decided what."""
    lock = threading.Lock()

    def write(line: str) -> None:
        data = line.encode("utf-8")
        with lock:
            fd = os.open(path, _OPEN_FLAGS, 0o600)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)

    return write
