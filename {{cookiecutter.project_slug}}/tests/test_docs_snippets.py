"""Maintained by the mrtr-server template (`cruft update` brings its fixes): every python block
of the docs pages runs, and does what its page says.

The pages: docs/multi-round-handlers.md and docs/results-and-completions.md; and the README's
tools and their tests (a first tool, a task tool), which run as printed.

Convention (stated at the top of the page): each block is a whole tools module whose first line
is `# src/<package>/tools/<name>.py`, importing `..mrtr_runtime` and
`from . import registry`. `load_snippet` runs a block exactly as such a module, inside a
throwaway package whose `registry` is fresh, then the tests drive the tool through
`MemoryClient`. `test_every_snippet_is_exercised` fails when a block is added without a test.
"""

from __future__ import annotations

import base64
import gzip
import importlib
import re
import sys
import types
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

{% if cookiecutter.include_tasks == "yes" -%}
import anyio
{% endif -%}
import pytest

from {{ cookiecutter.package_name }}.mrtr_runtime import (
    Registry,
)
from {{ cookiecutter.package_name }}.mrtr_runtime.server import (
    Server,
    SigningConfigError,
    codec_from_environment,
)
from {{ cookiecutter.package_name }}.mrtr_runtime.testing import (
    MemoryClient,
    RpcError,
    ToolCallResult,
)

Json = dict[str, Any]
F = TypeVar("F", bound=Callable[..., Any])

PACKAGE = "{{ cookiecutter.package_name }}"
DOC = Path(__file__).resolve().parents[1] / "docs" / "multi-round-handlers.md"
RESULTS_DOC = DOC.with_name("results-and-completions.md")
README = DOC.parents[1] / "README.md"
DOCS = (DOC, RESULTS_DOC, README)
KEY_HEX = "c4e6a8b0d2f41357a9c1e3f5b7d90246c8e0a2f4b6d81357e9c1a3f5b7d90246"
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)
HEADER = re.compile(rf"# src/{PACKAGE}/tools/([a-z_][a-z0-9_]*)\.py")
#: The README's tests of its own tools, run by test_the_readme_tests_pass_on_the_readme_tools.
TEST_HEADER = re.compile(r"# tests/(test_[a-z0-9_]+)\.py")
FORMS_ONLY: Json = {"elicitation": {"form": {}}}
#: What a full-featured host declares.
ALL: Json = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}

#: The snippet names some test below exercises; filled in as the decorators run at import.
EXERCISED: set[str] = set()


def exercises(name: str) -> Callable[[F], F]:
    EXERCISED.add(name)
    return lambda test: test


def snippets(doc: Path = DOC) -> dict[str, str]:
    """The python blocks of a page, by the module name on their first line."""
    found: dict[str, str] = {}
    for block in BLOCK.findall(doc.read_text(encoding="utf-8")):
        first_line = block.partition("\n")[0]
        if doc == README and TEST_HEADER.fullmatch(first_line):
            continue
        header = HEADER.fullmatch(first_line)
        assert header, (
            f"a python block must start with '# src/{PACKAGE}/tools/<name>.py': {first_line!r}"
        )
        assert header[1] not in found, f"two blocks are both {header[1]}.py"
        found[header[1]] = block
    return found


def all_snippets() -> dict[str, tuple[Path, str]]:
    """Every page's blocks, by module name, with the page each comes from."""
    found: dict[str, tuple[Path, str]] = {}
    for doc in DOCS:
        for name, block in snippets(doc).items():
            assert name not in found, f"two pages both have {name}.py"
            found[name] = (doc, block)
    return found


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def load_snippet() -> Iterator[Callable[[str], Registry]]:
    """Run a block as `<package>._doc_<name>.<name>` with `registry` fresh in its package."""
    added: list[str] = []

    def load(name: str) -> Registry:
        registry = Registry()
        package = types.ModuleType(f"{PACKAGE}._doc_{name}")
        package.__path__ = []
        package.registry = registry  # type: ignore[attr-defined]
        module = types.ModuleType(f"{package.__name__}.{name}")
        module.__package__ = package.__name__
        doc, block = all_snippets()[name]
        module.__file__ = str(doc)
        for loaded in (package, module):
            sys.modules[loaded.__name__] = loaded
            added.append(loaded.__name__)
        code = compile(block, f"{doc.name}:{name}.py", "exec")
        # The page is part of this project (not outside input), and running it is the point.
        exec(code, module.__dict__)  # noqa: S102
        return registry

    yield load
    for name in added:
        sys.modules.pop(name, None)


def serve(registry: Registry) -> Server:
    codec = codec_from_environment({"MRTR_SIGNING_KEY": KEY_HEX}, default_key_file=None)
    return Server(name="docs-snippets", version="0", registry=registry, signing=codec)


def accept(**content: Any) -> Json:
    return {"action": "accept", "content": content}


def text_of(result: Mapping[str, Any] | ToolCallResult) -> str:
    """The single text block of a wire result or of call_tool's."""
    (block,) = result.content if isinstance(result, ToolCallResult) else result["content"]
    text: str = block["text"]
    return text


class Answers:
    """An elicitation callback that answers each message with the first rule matching it."""

    def __init__(self, *rules: tuple[str, Json]) -> None:
        self.rules = rules
        self.messages: list[str] = []

    async def __call__(self, params: Mapping[str, object]) -> Json:
        message = str(params["message"])
        self.messages.append(message)
        return next(answer for needle, answer in self.rules if needle in message)


# -- the page itself --------------------------------------------------------------------------


def test_every_snippet_is_exercised() -> None:
    assert set(all_snippets()) == EXERCISED


def test_the_page_states_the_snippet_convention_and_has_the_six_skeletons() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert "`from . import registry`" in text
    assert "tests/test_docs_snippets.py" in text
    assert list(snippets()) == [
        "remove_file",
        "draft_issue",
        "name_branch",
        "invite_member",
        "publish_notes",
        "compress_logs",
    ]
    assert "ElicitResult" not in text  # answers are read with form_answer and a match
    assert "cookiecutter." not in text  # every template placeholder was rendered


def test_the_page_states_the_token_lifetime_the_runtime_uses() -> None:
    text = " ".join(DOC.read_text(encoding="utf-8").split())
    ((default, most),) = re.findall(
        r"valid until it expires \((\d+) s, .*?`MRTR_STATE_TTL_SECONDS`, at most (\d+) s\)", text
    )
    assert not re.search(r"\bhours?\b|\bdays?\b", text)

    def codec(**ttl: str) -> int:
        environ = {"MRTR_SIGNING_KEY": KEY_HEX, **ttl}
        ttl_seconds: int = codec_from_environment(environ, default_key_file=None).ttl_seconds
        return ttl_seconds

    assert codec() == int(default)
    assert codec(MRTR_STATE_TTL_SECONDS=most) == int(most)
    with pytest.raises(SigningConfigError):
        codec(MRTR_STATE_TTL_SECONDS=str(int(most) + 1))


# -- (a) remove_file: one round, then the effect ---------------------------------------------


@pytest.mark.anyio
@exercises("remove_file")
async def test_remove_file_deletes_after_one_yes_and_a_replay_changes_nothing(
    load_snippet: Callable[[str], Registry], tmp_path: Path
) -> None:
    server = serve(load_snippet("remove_file"))
    target = tmp_path / "old.log"
    target.write_text("x")
    client = MemoryClient(server, capabilities=FORMS_ONLY)
    arguments = {"path": str(target)}

    first = await client.request("tools/call", {"name": "remove_file", "arguments": arguments})
    assert list(first["inputRequests"]) == ["confirm"]
    assert first["inputRequests"]["confirm"]["params"]["message"] == f"Delete {target}?"
    assert target.exists()  # nothing happens before the answer
    final: Json = {
        "name": "remove_file",
        "arguments": arguments,
        "inputResponses": {"confirm": accept(confirmed=True)},
        "requestState": first["requestState"],
    }
    done = await client.request("tools/call", final)
    assert text_of(done) == f"Deleted {target}."
    assert not target.exists()
    # The same final request again (a lost reply, a restart, a replayed token): the runtime
    # answers it from the round's record, before the handler runs: the same result.
    again = await client.request("tools/call", final)
    assert text_of(again) == f"Deleted {target}."
    assert "isError" not in again
    # A new call of the tool, for the file that is gone: the handler finds nothing to do.
    fresh = await client.request("tools/call", {"name": "remove_file", "arguments": arguments})
    assert text_of(fresh) == f"{target} does not exist; nothing to delete."


@pytest.mark.anyio
@pytest.mark.parametrize(
    "answer", [{"action": "decline"}, {"action": "cancel"}, accept(confirmed=False)]
)
async def test_remove_file_keeps_the_file_on_decline_cancel_or_no(
    load_snippet: Callable[[str], Registry], tmp_path: Path, answer: Json
) -> None:
    server = serve(load_snippet("remove_file"))
    target = tmp_path / "keep.txt"
    target.write_text("x")
    client = MemoryClient(server, capabilities=ALL, elicitation=Answers(("", answer)))
    result = await client.call_tool("remove_file", {"path": str(target)})
    assert result.asked == (("confirm",),)
    assert text_of(result) == f"Kept {target}."
    assert target.exists()


@pytest.mark.anyio
@pytest.mark.parametrize("capabilities", [FORMS_ONLY, {"sampling": {}}], ids=["forms", "none"])
async def test_remove_file_never_deletes_on_a_yes_nobody_asked_for(
    load_snippet: Callable[[str], Registry], tmp_path: Path, capabilities: Json
) -> None:
    # A yes sent with the first call was not given to any question this server showed.
    target = tmp_path / "precious"
    target.write_text("x")
    client = MemoryClient(serve(load_snippet("remove_file")), capabilities=capabilities)
    params: Json = {
        "name": "remove_file",
        "arguments": {"path": str(target)},
        "inputResponses": {"confirm": accept(confirmed=True)},
    }
    try:
        result = await client.request("tools/call", params)
    except RpcError as error:
        assert error.code == -32021
    else:
        assert list(result["inputRequests"]) == ["confirm"]
    assert target.exists()


@pytest.mark.anyio
async def test_remove_file_never_deletes_without_a_form_to_ask_with(
    load_snippet: Callable[[str], Registry], tmp_path: Path
) -> None:
    registry = load_snippet("remove_file")
    tool = registry.tools["remove_file"]
    assert tool.wire["annotations"] == {
        "destructiveHint": True,
        "idempotentHint": True,
        "openWorldHint": False,
    }
    target = tmp_path / "precious"
    target.write_text("x")
    client = MemoryClient(serve(registry), capabilities={"sampling": {}})
    with pytest.raises(RpcError) as raised:
        await client.request(
            "tools/call", {"name": "remove_file", "arguments": {"path": str(target)}}
        )
    assert raised.value.code == -32021
    assert target.exists()


# -- (b) draft_issue: progressive rounds ------------------------------------------------------


@pytest.mark.anyio
@exercises("draft_issue")
@pytest.mark.parametrize(
    ("kind", "second_key", "details", "body"),
    [
        (
            "bug",
            "bug",
            accept(steps="Run it", expected="No crash"),
            "Steps:\nRun it\n\nExpected:\nNo crash",
        ),
        (
            "feature",
            "feature",
            accept(motivation="Scripts need it"),
            "Motivation:\nScripts need it",
        ),
    ],
)
async def test_draft_issue_asks_the_second_question_the_first_answer_calls_for(
    load_snippet: Callable[[str], Registry], kind: str, second_key: str, details: Json, body: str
) -> None:
    server = serve(load_snippet("draft_issue"))
    answers = Answers(
        ("about?", accept(title="JSON output", kind=kind)), ("'JSON output'", details)
    )
    client = MemoryClient(server, capabilities=ALL, elicitation=answers)
    result = await client.call_tool("draft_issue", {"project": "demo"})
    # Each round asks (and so the client sends) only its new key; round 2 quotes round 1.
    assert result.asked == (("basics",), (second_key,))
    assert answers.messages[0] == "What is the new issue for demo about?"
    assert "'JSON output'" in answers.messages[1]
    assert text_of(result) == f"# [{kind}] JSON output\n\n{body}\n"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        ({"action": "decline"}, None, "No issue drafted: the user stopped at the first question."),
        ({"action": "cancel"}, None, "No issue drafted: the user stopped at the first question."),
        (
            accept(title="t", kind="bug"),
            {"action": "decline"},
            "No issue drafted: the user stopped at the details.",
        ),
        (
            accept(title="t", kind="feature"),
            {"action": "cancel"},
            "No issue drafted: the user stopped at the details.",
        ),
    ],
)
async def test_draft_issue_treats_decline_and_cancel_as_answers(
    load_snippet: Callable[[str], Registry], first: Json, second: Json | None, expected: str
) -> None:
    server = serve(load_snippet("draft_issue"))
    answers = Answers(("about?", first), ("", second or {}))
    client = MemoryClient(server, capabilities=ALL, elicitation=answers)
    result = await client.call_tool("draft_issue", {"project": "demo"})
    assert text_of(result) == expected
    assert result.rounds == (1 if second is None else 2)


@pytest.mark.anyio
async def test_draft_issue_keeps_the_first_answer_a_client_tries_to_change_later(
    load_snippet: Callable[[str], Registry],
) -> None:
    # A client resends round 1 as "feature" while answering the bug details: round 1 is not
    # the question this round asked, so the change is ignored and the bug is drafted.
    client = MemoryClient(serve(load_snippet("draft_issue")), capabilities=FORMS_ONLY)
    params: Json = {"name": "draft_issue", "arguments": {"project": "demo"}}
    first = await client.request("tools/call", params)
    second = await client.request(
        "tools/call",
        {
            **params,
            "inputResponses": {"basics": accept(title="t", kind="bug")},
            "requestState": first["requestState"],
        },
    )
    assert list(second["inputRequests"]) == ["bug"]
    third = await client.request(
        "tools/call",
        {
            **params,
            "inputResponses": {
                "bug": accept(steps="s", expected="e"),
                "basics": accept(title="t", kind="feature"),
            },
            "requestState": second["requestState"],
        },
    )
    assert text_of(third).startswith("# [bug] t")


# -- (c) name_branch: elicitation, then sampling, then defaults ------------------------------


async def model_says(params: Mapping[str, object]) -> Json:
    return {
        "role": "assistant",
        "content": {"type": "text", "text": "feat/JSON-Output"},
        "model": "m",
    }


@pytest.mark.anyio
@exercises("name_branch")
async def test_name_branch_lets_the_user_choose_when_the_host_has_forms(
    load_snippet: Callable[[str], Registry],
) -> None:
    server = serve(load_snippet("name_branch"))
    answers = Answers(("", accept(name="Fix: login loop!")))
    client = MemoryClient(
        server,
        capabilities={"elicitation": {}, "sampling": {}},
        elicitation=answers,
        sampling=model_says,
    )
    result = await client.call_tool("name_branch", {"description": "Stop the login redirect loop"})
    assert result.asked == (("user",),)  # forms win over sampling when both are declared
    assert answers.messages == ["Branch name for: Stop the login redirect loop"]
    assert text_of(result) == "Branch: fix-login-loop (chosen by the user)"


@pytest.mark.anyio
async def test_name_branch_asks_the_hosts_model_without_forms(
    load_snippet: Callable[[str], Registry],
) -> None:
    server = serve(load_snippet("name_branch"))
    client = MemoryClient(server, capabilities={"sampling": {}})
    params: Json = {"name": "name_branch", "arguments": {"description": "Add JSON output"}}
    first = await client.request("tools/call", params)
    (request,) = first["inputRequests"].values()
    assert request["method"] == "sampling/createMessage"
    assert request["params"]["maxTokens"] == 20
    assert "Add JSON output" in request["params"]["messages"][0]["content"]["text"]
    asking = MemoryClient(client.server, capabilities=client.capabilities, sampling=model_says)
    result = await asking.call_tool("name_branch", params["arguments"])
    assert text_of(result) == "Branch: feat-json-output (suggested by the host's model)"


@pytest.mark.anyio
@pytest.mark.parametrize("capabilities", [{}, {"roots": {}}, {"elicitation": {"url": {}}}])
async def test_name_branch_makes_a_name_itself_when_it_cannot_ask(
    load_snippet: Callable[[str], Registry], capabilities: Json
) -> None:
    server = serve(load_snippet("name_branch"))
    result = await MemoryClient(server, capabilities=capabilities).request(
        "tools/call", {"name": "name_branch", "arguments": {"description": "Add JSON output!"}}
    )
    assert result["resultType"] == "complete"
    assert text_of(result) == "Branch: add-json-output (made from the description)"


@pytest.mark.anyio
@pytest.mark.parametrize("answer", [{"action": "decline"}, {"action": "cancel"}, accept(name="!!")])
async def test_name_branch_falls_back_when_the_user_chooses_nothing(
    load_snippet: Callable[[str], Registry], answer: Json
) -> None:
    server = serve(load_snippet("name_branch"))
    client = MemoryClient(server, capabilities=ALL, elicitation=Answers(("", answer)))
    result = await client.call_tool("name_branch", {"description": "Add JSON output"})
    assert text_of(result) == (
        "Branch: add-json-output (made from the description; the user chose none)"
    )


@pytest.mark.anyio
async def test_name_branch_stays_on_the_path_its_answers_took(
    load_snippet: Callable[[str], Registry],
) -> None:
    # Round 1 went to the model; the retry declares forms too, but the model's answer decides.
    server = serve(load_snippet("name_branch"))
    params: Json = {"name": "name_branch", "arguments": {"description": "x"}}
    first = await MemoryClient(server, capabilities={"sampling": {}}).request("tools/call", params)
    retry = {
        **params,
        "inputResponses": {"model": await model_says({})},
        "requestState": first["requestState"],
    }
    result = await MemoryClient(server, capabilities={"sampling": {}, "elicitation": {}}).request(
        "tools/call", retry
    )
    assert text_of(result) == "Branch: feat-json-output (suggested by the host's model)"


# -- (d) invite_member: several questions in one round, one asked again ----------------------


def invite_call(**retry: Any) -> Json:
    return {"name": "invite_member", "arguments": {"team": "core"}, **retry}


@pytest.mark.anyio
@exercises("invite_member")
async def test_invite_member_asks_both_at_once_and_re_asks_only_the_wrong_one(
    load_snippet: Callable[[str], Registry],
) -> None:
    client = MemoryClient(serve(load_snippet("invite_member")), capabilities=FORMS_ONLY)
    first = await client.request("tools/call", invite_call())
    assert sorted(first["inputRequests"]) == ["email", "role"]
    second = await client.request(
        "tools/call",
        invite_call(
            inputResponses={"email": accept(email="ada"), "role": accept(role="admin")},
            requestState=first["requestState"],
        ),
    )
    assert list(second["inputRequests"]) == ["email"]  # the role stands
    assert second["inputRequests"]["email"]["params"]["message"] == (
        "'ada' is not an email address. Whom should I invite (their email address)?"
    )
    done = await client.request(
        "tools/call",
        invite_call(
            inputResponses={"email": accept(email="ada@example.org")},
            requestState=second["requestState"],
        ),
    )
    assert text_of(done) == "Invited ada@example.org to core as admin."


@pytest.mark.anyio
async def test_invite_member_re_asks_a_role_outside_the_form_with_the_runtimes_reason(
    load_snippet: Callable[[str], Registry],
) -> None:
    client = MemoryClient(serve(load_snippet("invite_member")), capabilities=FORMS_ONLY)
    first = await client.request("tools/call", invite_call())
    second = await client.request(
        "tools/call",
        invite_call(
            inputResponses={"email": accept(email="a@b.c"), "role": accept(role="owner")},
            requestState=first["requestState"],
        ),
    )
    assert list(second["inputRequests"]) == ["role"]
    message = second["inputRequests"]["role"]["params"]["message"]
    assert message.startswith("That answer was not valid (role: ")
    assert message.endswith("Which role in core?")


@pytest.mark.anyio
@pytest.mark.parametrize("refused", ["email", "role"])
async def test_invite_member_invites_nobody_when_either_question_is_declined(
    load_snippet: Callable[[str], Registry], refused: str
) -> None:
    answers = {"email": accept(email="a@b.c"), "role": accept(role="member")}
    answers[refused] = {"action": "decline"}
    client = MemoryClient(serve(load_snippet("invite_member")), capabilities=FORMS_ONLY)
    first = await client.request("tools/call", invite_call())
    done = await client.request(
        "tools/call", invite_call(inputResponses=answers, requestState=first["requestState"])
    )
    assert text_of(done) == "Nobody was invited to core."


# -- (e) publish_notes: act on exactly what the user confirmed --------------------------------


@pytest.mark.anyio
@exercises("publish_notes")
async def test_publish_notes_publishes_what_was_shown_and_a_replay_changes_nothing(
    load_snippet: Callable[[str], Registry], tmp_path: Path
) -> None:
    source = tmp_path / "notes.md"
    source.write_text("one\ntwo\n", encoding="utf-8")
    client = MemoryClient(serve(load_snippet("publish_notes")), capabilities=FORMS_ONLY)
    call: Json = {"name": "publish_notes", "arguments": {"path": str(source)}}
    first = await client.request("tools/call", call)
    message = first["inputRequests"]["confirm"]["params"]["message"]
    assert message.startswith(f"Publish {source} (2 lines, sha256 ")
    final = {**call, "inputResponses": {"confirm": accept(confirmed=True)}}
    final["requestState"] = first["requestState"]
    assert text_of(await client.request("tools/call", final)) == (
        f"Published {source} to {source}.published."
    )
    assert (tmp_path / "notes.md.published").read_text(encoding="utf-8") == "one\ntwo\n"
    # The confirmation sent again is answered from its record: the same result, no write.
    assert text_of(await client.request("tools/call", final)) == (
        f"Published {source} to {source}.published."
    )


@pytest.mark.anyio
async def test_publish_notes_asks_again_when_the_file_changed_after_the_yes(
    load_snippet: Callable[[str], Registry], tmp_path: Path
) -> None:
    source = tmp_path / "notes.md"
    source.write_text("shown\n", encoding="utf-8")
    client = MemoryClient(serve(load_snippet("publish_notes")), capabilities=FORMS_ONLY)
    call: Json = {"name": "publish_notes", "arguments": {"path": str(source)}}
    first = await client.request("tools/call", call)
    source.write_text("swapped in after the question\n", encoding="utf-8")
    yes = {"confirm": accept(confirmed=True)}
    second = await client.request(
        "tools/call", {**call, "inputResponses": yes, "requestState": first["requestState"]}
    )
    message = second["inputRequests"]["confirm"]["params"]["message"]
    assert message.startswith(f"{source} changed after you confirmed. Publish {source}")
    assert not (tmp_path / "notes.md.published").exists()
    # The re-ask dropped the old yes: a retry without a new answer publishes nothing.
    bare = await client.request("tools/call", {**call, "requestState": second["requestState"]})
    assert list(bare["inputRequests"]) == ["confirm"]
    assert not (tmp_path / "notes.md.published").exists()
    done = await client.request(
        "tools/call", {**call, "inputResponses": yes, "requestState": second["requestState"]}
    )
    assert text_of(done) == f"Published {source} to {source}.published."
    assert (tmp_path / "notes.md.published").read_text(encoding="utf-8") == (
        "swapped in after the question\n"
    )


@pytest.mark.anyio
@pytest.mark.parametrize("answer", [{"action": "decline"}, accept(confirmed=False)])
async def test_publish_notes_publishes_nothing_on_a_no(
    load_snippet: Callable[[str], Registry], tmp_path: Path, answer: Json
) -> None:
    source = tmp_path / "notes.md"
    source.write_text("x\n", encoding="utf-8")
    client = MemoryClient(
        serve(load_snippet("publish_notes")),
        capabilities=FORMS_ONLY,
        elicitation=Answers(("", answer)),
    )
    result = await client.call_tool("publish_notes", {"path": str(source)})
    assert result.asked == (("confirm",),)
    assert text_of(result) == "Nothing was published."
    assert not (tmp_path / "notes.md.published").exists()


# -- (f) compress_logs: confirm, then run as a task ------------------------------------------

TASKS = {**FORMS_ONLY, "extensions": {"io.modelcontextprotocol/tasks": {}}}


def write_logs(directory: Path, count: int = 3) -> dict[str, bytes]:
    logs = {f"app-{number}.log": f"line {number}\n".encode() * 100 for number in range(count)}
    for name, data in logs.items():
        (directory / name).write_bytes(data)
    return logs


def compressed(directory: Path) -> dict[str, bytes]:
    return {
        path.name.removesuffix(".gz"): gzip.decompress(path.read_bytes())
        for path in sorted(directory.glob("*.gz"))
    }


def matching(directory: Path, pattern: str) -> list[Path]:
    return sorted(directory.glob(pattern))


{% if cookiecutter.include_tasks == "yes" -%}
async def until_ended(client: MemoryClient, task_id: str) -> Json:
    with anyio.fail_after(10):
        while True:
            task = await client.request("tasks/get", {"taskId": task_id})
            if task["status"] not in ("working", "input_required"):
                return task
            await anyio.sleep(0.02)


@pytest.mark.anyio
@exercises("compress_logs")
async def test_compress_logs_confirmed_runs_as_a_task_and_a_replay_does_nothing(
    load_snippet: Callable[[str], Registry], tmp_path: Path
) -> None:
    logs = write_logs(tmp_path)
    client = MemoryClient(serve(load_snippet("compress_logs")), capabilities=TASKS)
    call: Json = {"name": "compress_logs", "arguments": {"directory": str(tmp_path)}}
    first = await client.request("tools/call", call)
    assert first["resultType"] == "input_required"  # the question is a round, not a task
    size = sum(map(len, logs.values()))
    assert first["inputRequests"]["confirm"]["params"]["message"] == (
        f"Compress 3 .log files ({size} bytes) in {tmp_path}?"
    )
    confirming = {
        **call,
        "inputResponses": {"confirm": accept(confirmed=True)},
        "requestState": first["requestState"],
    }

    created = await client.request("tools/call", confirming)

    assert created["resultType"] == "task"
    assert created["statusMessage"] == f"Compressing 3 files in {tmp_path}"
    task = await until_ended(client, created["taskId"])
    assert task["status"] == "completed"
    assert text_of(task["result"]) == f"Compressed 3 files in {tmp_path}."
    assert compressed(tmp_path) == logs
    assert not matching(tmp_path, "*.log")
    # The confirmation replayed is answered from its record, before the handler runs: the
    # same task, nothing compressed again.
    replayed = await client.request("tools/call", confirming)
    assert replayed["resultType"] == "task"
    assert replayed["taskId"] == created["taskId"]
    assert compressed(tmp_path) == logs


{% endif -%}
@pytest.mark.anyio
{%- if cookiecutter.include_tasks == "no" %}
@exercises("compress_logs")
{%- endif %}
async def test_compress_logs_runs_inline_for_a_host_without_tasks(
    load_snippet: Callable[[str], Registry], tmp_path: Path
) -> None:
    logs = write_logs(tmp_path, 2)
    client = MemoryClient(
        serve(load_snippet("compress_logs")),
        capabilities=FORMS_ONLY,
        elicitation=Answers(("Compress 2", accept(confirmed=True))),
    )
    result = await client.call_tool("compress_logs", {"directory": str(tmp_path)})
    assert text_of(result) == f"Compressed 2 files in {tmp_path}."
    assert compressed(tmp_path) == logs


@pytest.mark.anyio
async def test_compress_logs_asks_again_when_the_files_changed_and_does_nothing_on_a_no(
    load_snippet: Callable[[str], Registry], tmp_path: Path
) -> None:
    write_logs(tmp_path, 1)
    client = MemoryClient(serve(load_snippet("compress_logs")), capabilities=TASKS)
    call: Json = {"name": "compress_logs", "arguments": {"directory": str(tmp_path)}}
    first = await client.request("tools/call", call)
    write_logs(tmp_path, 2)  # one more file after the question
    yes = {"confirm": accept(confirmed=True)}
    second = await client.request(
        "tools/call", {**call, "inputResponses": yes, "requestState": first["requestState"]}
    )
    message = second["inputRequests"]["confirm"]["params"]["message"]
    assert message.startswith("The files changed after you confirmed. Compress 2 .log files")
    no = {"confirm": accept(confirmed=False)}
    third = await client.request(
        "tools/call", {**call, "inputResponses": no, "requestState": second["requestState"]}
    )
    assert text_of(third) == "Nothing was compressed."
    assert not matching(tmp_path, "*.gz")


# -- README.md: its tools and their tests --------------------------------------------------------


def readme_tests() -> dict[str, str]:
    """The README's test modules, by name."""
    found: dict[str, str] = {}
    for block in BLOCK.findall(README.read_text(encoding="utf-8")):
        header = TEST_HEADER.fullmatch(block.partition("\n")[0])
        if header:
            found[header[1]] = block
    return found


#: The README's tests, by the README tool each one tests.
README_TESTS = {"test_greet": "greet"{% if cookiecutter.include_tasks == "yes" %}, "test_add_up": "add_up"{% endif %}}


@pytest.mark.anyio
@exercises("greet")
{%- if cookiecutter.include_tasks == "yes" %}
@exercises("add_up")
{%- endif %}
async def test_the_readme_tests_pass_on_the_readme_tools(
    load_snippet: Callable[[str], Registry], monkeypatch: pytest.MonkeyPatch
) -> None:
    tests = readme_tests()
    assert list(tests) == list(README_TESTS)
    app = importlib.import_module(f"{PACKAGE}.app")
    for test_name, tool in README_TESTS.items():
        # The README's test imports the project's build_server: here it serves the README's tool.
        registry = load_snippet(tool)
        monkeypatch.setattr(app, "build_server", lambda registry=registry: serve(registry))
        namespace: dict[str, Any] = {"__name__": f"readme_{test_name}"}
        # The page is part of this project (not outside input), and running it is the point.
        code = compile(tests[test_name], f"README.md:{test_name}.py", "exec")
        exec(code, namespace)  # noqa: S102
        cases = [case for name, case in namespace.items() if name.startswith("test_")]
        assert len(cases) == 1
        await cases[0]()
        # A test a reader takes in at a glance.
        assert len(tests[test_name].split("async def ", 1)[1].strip().splitlines()) <= 5


# -- docs/results-and-completions.md -----------------------------------------------------------


def test_the_results_page_states_the_convention_and_has_its_modules() -> None:
    text = RESULTS_DOC.read_text(encoding="utf-8")
    assert "`from . import registry`" in text
    assert "tests/test_docs_snippets.py" in text
    assert list(snippets(RESULTS_DOC)) == [
        "show_picture",
        "code_review",
        "http_status",
        "order_laptop",
        "count_words",
    ]
    assert "cookiecutter." not in text


PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))


@pytest.fixture
def pictures(
    load_snippet: Callable[[str], Registry], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> MemoryClient:
    """A client of `show_picture` over a pictures folder in tmp_path."""
    registry = load_snippet("show_picture")
    module = sys.modules[f"{PACKAGE}._doc_show_picture.show_picture"]
    monkeypatch.setattr(module, "PICTURES", tmp_path / "pictures")
    (tmp_path / "pictures").mkdir()
    (tmp_path / "pictures" / "cat.png").write_bytes(PNG)
    (tmp_path / "pictures" / "notes.txt").write_text("not a picture")
    (tmp_path / "secret.png").write_bytes(PNG)
    return MemoryClient(serve(registry), capabilities={})


@pytest.mark.anyio
@exercises("show_picture")
async def test_show_picture_returns_the_image_and_a_link_to_its_file(
    pictures: MemoryClient, tmp_path: Path
) -> None:
    result = await pictures.request(
        "tools/call", {"name": "show_picture", "arguments": {"name": "cat.png"}}
    )
    path = tmp_path / "pictures" / "cat.png"
    assert result["content"] == [
        {"type": "image", "data": base64.b64encode(PNG).decode(), "mimeType": "image/png"},
        {
            "type": "resource_link",
            "uri": path.resolve().as_uri(),
            "name": "cat.png",
            "mimeType": "image/png",
            "size": len(PNG),
        },
    ]
    assert "isError" not in result


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("../secret.png", "There is no picture"),
        ("dog.png", "There is no picture"),
        ("notes.txt", "is not a picture"),
    ],
)
async def test_show_picture_refuses_what_is_not_a_picture_in_the_folder(
    pictures: MemoryClient, name: str, reason: str
) -> None:
    result = await pictures.request(
        "tools/call", {"name": "show_picture", "arguments": {"name": name}}
    )
    assert result["isError"] is True
    assert reason in text_of(result)


@pytest.mark.anyio
async def test_show_picture_refuses_a_picture_past_its_size_bound(
    pictures: MemoryClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = sys.modules[f"{PACKAGE}._doc_show_picture.show_picture"]
    monkeypatch.setattr(module, "MAX_BYTES", len(PNG) - 1)
    result = await pictures.request(
        "tools/call", {"name": "show_picture", "arguments": {"name": "cat.png"}}
    )
    assert result["isError"] is True
    assert f"is {len(PNG)} bytes" in text_of(result)


def complete(prompt: str, argument: str, value: str, **chosen: str) -> Json:
    return {
        "ref": {"type": "ref/prompt", "name": prompt},
        "argument": {"name": argument, "value": value},
        "context": {"arguments": chosen},
    }


@pytest.mark.anyio
@exercises("code_review")
async def test_code_review_completes_its_arguments_and_embeds_the_code(
    load_snippet: Callable[[str], Registry],
) -> None:
    client = MemoryClient(serve(load_snippet("code_review")), capabilities={})
    languages = await client.request(
        "completion/complete", complete("code_review", "language", "Py")
    )
    assert languages["completion"] == {"values": ["python"], "total": 1, "hasMore": False}
    frameworks = await client.request(
        "completion/complete", complete("code_review", "framework", "f", language="python")
    )
    assert frameworks["completion"]["values"] == ["fastapi", "flask"]
    unknown = await client.request(
        "completion/complete", complete("code_review", "framework", "", language="cobol")
    )
    assert unknown["completion"]["values"] == []
    prompt = await client.request(
        "prompts/get",
        {
            "name": "code_review",
            "arguments": {"language": "python", "framework": "flask", "code": "print(1)"},
        },
    )
    assert prompt["messages"] == [
        {
            "role": "user",
            "content": {
                "type": "text",
                "text": "Review this python (flask) code. Point out bugs first, then style.",
            },
        },
        {
            "role": "user",
            "content": {
                "type": "resource",
                "resource": {"uri": "snippet:///review.python", "text": "print(1)"},
            },
        },
    ]
    with pytest.raises(RpcError) as raised:
        await client.request("completion/complete", complete("review", "language", ""))
    assert raised.value.code == -32602


@pytest.mark.anyio
@exercises("http_status")
async def test_http_status_may_be_kept_a_day_and_the_incident_log_never(
    load_snippet: Callable[[str], Registry], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = load_snippet("http_status")
    module = sys.modules[f"{PACKAGE}._doc_http_status.http_status"]
    log = tmp_path / "incidents.log"
    monkeypatch.setattr(module, "INCIDENTS", log)
    client = MemoryClient(serve(registry), capabilities={})

    found = await client.request("resources/read", {"uri": "http-status://404"})
    assert found["contents"][0]["text"].startswith("404 Not Found: ")
    assert (found["ttlMs"], found["cacheScope"]) == (86_400_000, "public")
    unknown = await client.request("resources/read", {"uri": "http-status://299"})
    assert unknown["contents"][0]["text"] == "299 is not a registered HTTP status code."
    with pytest.raises(RpcError) as raised:  # the variable is typed by the parameter: an int
        await client.request("resources/read", {"uri": "http-status://teapot"})
    assert raised.value.code == -32602
    completion = await client.request(
        "completion/complete",
        {
            "ref": {"type": "ref/resource", "uri": "http-status://{code}"},
            "argument": {"name": "code", "value": "40"},
        },
    )
    assert completion["completion"]["values"][:3] == ["400", "401", "402"]
    assert all(value.startswith("40") for value in completion["completion"]["values"])

    first = await client.request("resources/read", {"uri": "incidents://latest"})
    assert first["contents"][0]["text"] == "No incident is logged."
    log.write_text("db failover at 02:10\n", encoding="utf-8")
    second = await client.request("resources/read", {"uri": "incidents://latest"})
    assert second["contents"][0]["text"] == "db failover at 02:10"
    for result in (first, second):
        assert (result["ttlMs"], result["cacheScope"]) == (0, "private")


def order_call(**retry: Any) -> Json:
    return {"name": "order_laptop", "arguments": {"team": "core"}, **retry}


@pytest.mark.anyio
@exercises("order_laptop")
async def test_order_laptop_asks_with_titled_choices_and_takes_a_valid_order(
    load_snippet: Callable[[str], Registry],
) -> None:
    client = MemoryClient(serve(load_snippet("order_laptop")), capabilities=FORMS_ONLY)
    first = await client.request("tools/call", order_call())
    properties = first["inputRequests"]["order"]["params"]["requestedSchema"]["properties"]
    assert properties["size"] == {
        "type": "string",
        "oneOf": [
            {"const": "13", "title": "13-inch, light"},
            {"const": "15", "title": "15-inch, roomy"},
        ],
        "default": "13",
    }
    assert properties["extras"] == {
        "type": "array",
        "description": "Up to two",
        "maxItems": 2,
        "items": {
            "anyOf": [
                {"const": "dock", "title": "USB-C dock"},
                {"const": "bag", "title": "Laptop bag"},
                {"const": "mouse", "title": "Wireless mouse"},
            ]
        },
        "default": [],
    }
    too_many = await client.request(
        "tools/call",
        order_call(
            inputResponses={"order": accept(size="15", extras=["dock", "bag", "mouse"])},
            requestState=first["requestState"],
        ),
    )
    message = too_many["inputRequests"]["order"]["params"]["message"]
    assert message.startswith("That answer was not valid (extras: ")
    done = await client.request(
        "tools/call",
        order_call(
            inputResponses={"order": accept(size="15", extras=["dock", "bag"], quantity=2)},
            requestState=too_many["requestState"],
        ),
    )
    assert text_of(done) == "Ordered 2 x 15-inch for core with dock, bag."
    declined = await client.request(
        "tools/call",
        order_call(
            inputResponses={"order": {"action": "decline"}}, requestState=first["requestState"]
        ),
    )
    assert text_of(declined) == "Nothing was ordered."


@pytest.fixture
def word_files(tmp_path: Path) -> list[str]:
    (tmp_path / "a.txt").write_text("one two three\n", encoding="utf-8")
    (tmp_path / "b.txt").write_text("four five\n", encoding="utf-8")
    return [str(tmp_path / "a.txt"), str(tmp_path / "b.txt")]


@pytest.mark.anyio
@exercises("count_words")
@pytest.mark.parametrize("era", ["modern", "legacy"])
async def test_count_words_reports_each_file_to_a_caller_with_a_progress_token(
    load_snippet: Callable[[str], Registry],
    word_files: list[str],
    era: Literal["modern", "legacy"],
) -> None:
    # call_tool sends a progressToken with every call and collects what came for it.
    client = MemoryClient(serve(load_snippet("count_words")), capabilities={}, era=era)
    result = await client.call_tool("count_words", {"paths": word_files})
    first, second = word_files
    assert result.text == f"{first}: 3 words\n{second}: 2 words"
    assert result.progress == ((1, 2, f"Counted {first}"), (2, 2, f"Counted {second}"))


@pytest.mark.anyio
async def test_count_words_sends_no_progress_to_a_caller_without_a_token(
    load_snippet: Callable[[str], Registry], word_files: list[str]
) -> None:
    client = MemoryClient(serve(load_snippet("count_words")), capabilities={})
    call = {"name": "count_words", "arguments": {"paths": word_files}}
    result = await client.request("tools/call", call)
    assert text_of(result).endswith(": 2 words")
    assert client.notifications == []


@pytest.mark.anyio
async def test_count_words_stops_at_a_file_it_cannot_read(
    load_snippet: Callable[[str], Registry], word_files: list[str], tmp_path: Path
) -> None:
    client = MemoryClient(serve(load_snippet("count_words")), capabilities={})
    missing = str(tmp_path / "missing.txt")
    result = await client.call_tool("count_words", {"paths": [word_files[0], missing]})
    assert result.is_error
    assert result.text == f"Cannot read {missing}: No such file or directory."
    assert [report.progress for report in result.progress] == [1]
