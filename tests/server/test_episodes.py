"""A session is an agent episode holding conversations: a title, a sub-agent, a compaction or a fresh framework call
never replaces, branches or refuses the main loop's turns, in linear and tree sessions, concurrent or not; every
sample names its conversation, and every sampled id is in exactly one sample with loss mask 1."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.server.conftest import Server, ServerFactory, running_server
from tests.server.turns.test_completions import as_message, client
from tito.tokenizer_loading import LocalTokenizer
from tito.trajectory.events import TrajectoryKind

SYSTEM = {"role": "system", "content": "You are a coding agent."}
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {}}}}]


@pytest.fixture(scope="module", params=["linear", "tree"])
def episode_server(request: pytest.FixtureRequest, serve: ServerFactory) -> Server:
    return serve(trajectory=TrajectoryKind(request.param))


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def ask(server: Server, session_id: str, messages: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
    headers = kwargs.pop("headers", None)
    reply = client(server, session_id).chat.completions.create(
        model="m", messages=messages, extra_headers=headers, **kwargs
    )
    return as_message(reply)


def samples(server: Server, session_id: str, **body: Any) -> list[dict[str, Any]]:
    response = server.http.post(f"/sessions/{session_id}/samples", json=body or None)
    assert response.status_code == 200, response.text
    return list(response.json()["samples"])


def conversations(server: Server, session_id: str) -> list[dict[str, Any]]:
    response = server.http.get(f"/sessions/{session_id}")
    assert response.status_code == 200, response.text
    return list(response.json()["conversations"])


def assert_every_sampled_id_trained_once(server: Server, session_id: str, kept: list[dict[str, Any]]) -> None:
    """Every committed generation's ids lie in exactly one sample, under loss mask 1."""
    store = server.state.registry.get(session_id).trajectory.store
    trained: dict[int, int] = {}
    for sample in kept:
        for span in sample["spans"]:
            if span["end"] > span["start"] and all(sample["loss_mask"][span["start"] : span["end"]]):
                node = store.get(span["node_id"]).turn
                assert sample["tokens"][span["start"] : span["end"]] == list(node.output_ids)
                trained[span["node_id"]] = trained.get(span["node_id"], 0) + 1
    assert trained == {node.node_id: 1 for node in store}, trained


def test_a_title_after_one_main_turn_opens_a_side_conversation_and_drops_nothing(episode_server: Server) -> None:
    """The defect: a linear session took the title as a one-step retry of the main turn and dropped it with a 200."""
    session_id = episode_server.new_session()
    main = [SYSTEM, user("fix the bug")]
    main.append(ask(episode_server, session_id, main, tools=TOOLS))
    ask(episode_server, session_id, [{"role": "system", "content": "Write a title."}, user("fix the bug")])
    main += [user("and run the tests")]
    ask(episode_server, session_id, main, tools=TOOLS)
    listed = conversations(episode_server, session_id)
    assert [(c["id"], c["kind"], c["parent"], c["inferred"], c["turns"]) for c in listed] == [
        ("c0", "main", None, True, 2),
        ("c1", "side", "c0", True, 1),
    ]
    kept = samples(episode_server, session_id)
    assert [(s["conversation"]["id"], s["conversation"]["kind"]) for s in kept] == [("c0", "main"), ("c1", "side")]
    assert_every_sampled_id_trained_once(episode_server, session_id, kept)
    main_only = samples(episode_server, session_id, conversation_kinds=["main"])
    assert [s["conversation"]["id"] for s in main_only] == ["c0"] and main_only[0]["tokens"] == kept[0]["tokens"]


def test_a_title_sent_while_a_main_turn_generates_commits_and_so_does_the_turn(episode_server: Server) -> None:
    """Interactive Claude Code sends its title in the same millisecond as the turn: both commit, in any order."""
    session_id = episode_server.new_session()
    main = [SYSTEM, user("first")]
    main.append(ask(episode_server, session_id, main, tools=TOOLS))
    episode_server.engine.delay = 0.2

    async def overlap() -> list[Any]:
        sdk = openai.AsyncOpenAI(base_url=episode_server.chat_url(session_id), api_key="unused", max_retries=0)
        try:
            return list(
                await asyncio.gather(
                    sdk.chat.completions.create(model="m", messages=[*main, user("second")], tools=TOOLS),  # type: ignore[arg-type]
                    sdk.chat.completions.create(model="m", messages=[user("title for: second")]),
                    sdk.chat.completions.create(model="m", messages=[user("title for: first")]),
                    return_exceptions=True,
                )
            )
        finally:
            await sdk.close()

    results = asyncio.run(overlap())
    assert not [r for r in results if isinstance(r, Exception)], results
    listed = conversations(episode_server, session_id)
    assert sorted(c["kind"] for c in listed) == ["main", "side", "side"]
    assert next(c for c in listed if c["kind"] == "main")["turns"] == 2
    assert_every_sampled_id_trained_once(episode_server, session_id, samples(episode_server, session_id))


def test_fresh_system_user_calls_each_keep_their_generation(episode_server: Server) -> None:
    """dspy's ReAct sends every call as a fresh [system, user] conversation: each is its own conversation."""
    session_id = episode_server.new_session()
    for step in range(3):
        ask(episode_server, session_id, [SYSTEM, user(f"trajectory so far: step {step}")])
    listed = conversations(episode_server, session_id)
    assert [c["kind"] for c in listed] == ["main", "side", "side"]
    kept = samples(episode_server, session_id)
    assert len(kept) == 3
    assert_every_sampled_id_trained_once(episode_server, session_id, kept)


def test_a_retry_of_the_same_opening_is_still_a_retry_within_its_conversation(serve: ServerFactory) -> None:
    linear = serve()
    session_id = linear.new_session()
    ask(linear, session_id, [SYSTEM, user("q")])
    ask(linear, session_id, [SYSTEM, user("q")])
    listed = conversations(linear, session_id)
    assert [(c["id"], c["turns"]) for c in listed] == [("c0", 1)]  # a regenerated reply replaces the first


def test_sub_agents_stated_by_headers_are_labelled_with_their_parent(episode_server: Server) -> None:
    session_id = episode_server.new_session()
    main = [SYSTEM, user("delegate")]
    main.append(ask(episode_server, session_id, main, tools=TOOLS))
    claude = {"x-claude-code-session-id": "s1", "x-claude-code-agent-id": "agent-7"}
    sub = [{"role": "system", "content": "You are a sub-agent."}, user("search the repo")]
    sub.append(ask(episode_server, session_id, sub, tools=TOOLS, headers=claude))
    ask(episode_server, session_id, [*sub, user("keep going")], tools=TOOLS, headers=claude)
    codex_meta = {"thread_source": "subagent", "parent_thread_id": "main-thread", "subagent_kind": "explorer"}
    codex = {"thread-id": "child-thread", "x-codex-turn-metadata": json.dumps(codex_meta)}
    ask(episode_server, session_id, [user("explore")], tools=TOOLS, headers=codex)
    tito = {"X-Tito-Conversation": "judge", "X-Tito-Conversation-Kind": "side", "X-Tito-Spawned-By": "call_1"}
    ask(episode_server, session_id, [SYSTEM, user("delegate")], headers=tito)  # the main opening, but stated apart
    listed = conversations(episode_server, session_id)
    labels = [(c["id"], c["kind"], c["parent"], c["source"], c["inferred"], c["turns"]) for c in listed]
    assert labels == [
        ("c0", "main", None, "prefix", True, 1),
        ("c1", "subagent", "c0", "claude-code", False, 2),
        ("c2", "subagent", "c0", "codex", False, 1),
        ("c3", "side", "c0", "x-tito-conversation", False, 1),
    ]
    assert listed[3]["spawned_by"] == "call_1"
    assert_every_sampled_id_trained_once(episode_server, session_id, samples(episode_server, session_id))
    subagents = samples(episode_server, session_id, conversation_kinds=["subagent"])
    assert [s["conversation"]["id"] for s in subagents] == ["c1", "c2"]


def test_a_compaction_that_leaves_out_the_last_reply_forks_and_the_continuation_is_linked(
    episode_server: Server,
) -> None:
    """Claude Code's compaction resends the conversation without its last reply, plus its own request: a linear
    session took it as a one-step retry and dropped the reply; now it is a compaction conversation."""
    session_id = episode_server.new_session()
    main = [SYSTEM, user("step 1")]
    main.append(ask(episode_server, session_id, main, tools=TOOLS))
    main += [user("step 2")]
    main.append(ask(episode_server, session_id, main, tools=TOOLS))
    summary = ask(episode_server, session_id, [*main[:-1], user("Summarise the conversation so far.")], tools=TOOLS)
    continued = [SYSTEM, user(f"This session continues from a summary: {summary['content']}")]
    continued.append(ask(episode_server, session_id, continued, tools=TOOLS))
    ask(episode_server, session_id, [*continued, user("step 3")], tools=TOOLS)
    listed = conversations(episode_server, session_id)
    labels = [(c["id"], c["kind"], c["parent"], c["continues"], c["compaction"], c["turns"]) for c in listed]
    assert labels == [
        ("c0", "main", None, None, None, 2),
        ("c1", "compaction", "c0", None, None, 1),
        ("c2", "main", None, "c0", "c1", 2),
    ]
    assert listed[1]["forked_from"] == 1
    assert_every_sampled_id_trained_once(episode_server, session_id, samples(episode_server, session_id))


CLAUDE_TOOLS = [{"name": "Bash", "description": "Run a command.", "input_schema": {"type": "object", "properties": {}}}]
CLAUDE_SUMMARY = "tito-compacted: out.txt holds tito."


@pytest.mark.parametrize("trajectory", ["linear", "tree"])
def test_claude_codes_compaction_is_its_own_conversation_and_the_main_loop_continues_from_its_summary(
    serve: ServerFactory, qwen3_tokenizer: LocalTokenizer, trajectory: str
) -> None:
    """What Claude Code 2.1.332 sends on the Messages route for `/compact` (and auto-compaction): the conversation
    without its last reply plus its summary request; then a fresh conversation whose first user message holds only
    the summary's `<summary>` block (the `<analysis>` dropped, "Summary:" before it) and a billing line that changed.
    The compaction is its own conversation; the fresh one is the main loop's continuation, linked to it."""
    server = serve(trajectory=TrajectoryKind(trajectory))
    session_id = server.new_session()

    def encoded(text: str) -> list[int]:
        return list(qwen3_tokenizer.encode(text, add_special_tokens=False))

    def turn(system: str, messages: list[dict[str, Any]], tools: bool = True) -> dict[str, Any]:
        body = {"model": "claude-opus-5-5", "max_tokens": 64, "stream": False, "messages": messages}
        body["system"] = [{"type": "text", "text": system}, {"type": "text", "text": "You are Claude Code."}]
        if tools:
            body["tools"] = CLAUDE_TOOLS
        reply = server.http.post(f"/sessions/{session_id}/v1/messages", json=body)
        assert reply.status_code == 200, reply.text
        return {"role": "assistant", "content": reply.json()["content"]}

    billing = "x-anthropic-billing-header: cc_version=2.1.332.a1b; cc_entrypoint=sdk-cli;"
    bash_call = {"name": "Bash", "arguments": {"command": "printf tito > out.txt"}}
    server.engine.queue(encoded(f"<tool_call>\n{json.dumps(bash_call)}\n</tool_call><|im_end|>"))
    main: list[dict[str, Any]] = [user("Write tito into out.txt.")]
    main.append(turn(billing, main))
    call_id = main[-1]["content"][-1]["id"]
    main.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": "done"}]})
    main.append(turn(billing, main))
    compacting = [*main[:-1], user("Your task is to create a detailed summary. Do NOT call any tools.")]
    server.engine.queue(
        encoded(f"<analysis>One file written.</analysis>\n<summary>{CLAUDE_SUMMARY}</summary><|im_end|>")
    )
    turn(billing, compacting)
    resumed = (
        "This session is being continued from a previous conversation that ran out of context. The summary below "
        f"covers the earlier portion of the conversation.\n\nSummary:\n{CLAUDE_SUMMARY}\n\nContinue the "
        "conversation from where it left off without asking the user any further questions."
    )
    continued: list[dict[str, Any]] = [user(resumed), user("Now append again.")]
    changed_billing = billing.replace("a1b", "c2d")
    continued.append(turn(changed_billing, continued))
    turn(changed_billing, [*continued, user("And once more.")])
    listed = conversations(server, session_id)
    labels = [(c["id"], c["kind"], c["parent"], c["continues"], c["compaction"], c["turns"]) for c in listed]
    assert labels == [
        ("c0", "main", None, None, None, 2),
        ("c1", "compaction", "c0", None, None, 1),
        ("c2", "main", None, "c0", "c1", 2),
    ]
    kept = samples(server, session_id)
    assert_every_sampled_id_trained_once(server, session_id, kept)
    assert [s["conversation"]["kind"] for s in samples(server, session_id, conversation_kinds=["main"])] == [
        "main",
        "main",
    ]


def test_a_codex_compaction_request_is_its_own_conversation_even_with_other_tools(serve: ServerFactory) -> None:
    linear = serve()
    session_id = linear.new_session()
    thread = {"thread-id": "t-1", "x-codex-turn-metadata": json.dumps({"request_kind": "normal"})}
    main = [SYSTEM, user("task")]
    main.append(ask(linear, session_id, main, tools=TOOLS, headers=thread))
    compacting = {**thread, "x-codex-turn-metadata": json.dumps({"request_kind": "compaction"})}
    ask(linear, session_id, [*main, user("compact")], headers=compacting)  # tools: none, where the thread had some
    labels = [(c["id"], c["kind"], c["parent"]) for c in conversations(linear, session_id)]
    assert labels == [("c0", "main", None), ("c1", "compaction", "c0")]


def test_codex_after_its_compaction_continues_the_thread_linked_to_it(episode_server: Server) -> None:
    """What Codex 0.171.0 sends after compacting a thread: its opening again, then the summary in place of the turns
    it replaced, under the same `thread-id`. That resends the main conversation's opening but not its turns: the
    main loop's continuation (not a fork of it), which the thread's next request extends."""
    session_id = episode_server.new_session()
    normal = {"thread-id": "t-9", "x-codex-turn-metadata": json.dumps({"request_kind": "normal"})}
    compacting = {**normal, "x-codex-turn-metadata": json.dumps({"request_kind": "compaction"})}
    main = [SYSTEM, user("TASK: read the file")]
    main.append(ask(episode_server, session_id, main, tools=TOOLS, headers=normal))
    main.append(user("the file holds 42"))
    summary = ask(episode_server, session_id, [*main, user("CONTEXT CHECKPOINT COMPACTION")], headers=compacting)
    continued = [*main[:2], user(f"Here is the summary produced by the other language model: {summary['content']}")]
    continued.append(ask(episode_server, session_id, continued, tools=TOOLS, headers=normal))
    ask(episode_server, session_id, [*continued, user("and again")], tools=TOOLS, headers=normal)
    listed = conversations(episode_server, session_id)
    labels = [(c["id"], c["kind"], c["parent"], c["continues"], c["compaction"], c["turns"]) for c in listed]
    assert labels == [
        ("c0", "main", None, None, None, 1),
        ("c1", "compaction", "c0", None, None, 1),
        ("c2", "main", None, "c0", "c1", 2),
    ]
    assert listed[2]["key"] == "codex:t-9" and listed[2]["forked_from"] is None
    assert_every_sampled_id_trained_once(episode_server, session_id, samples(episode_server, session_id))


def test_a_reflection_call_without_tools_continues_the_conversation_and_is_counted(serve: ServerFactory) -> None:
    """autogen's reflect_on_tool_use sends its last call without `tools`: the stored tools stay (a harness rule)."""
    linear = serve()
    session_id = linear.new_session()
    main = [SYSTEM, user("use the tool")]
    main.append(ask(linear, session_id, main, tools=TOOLS))
    ask(linear, session_id, [*main, user("reflect")])
    described = linear.http.get(f"/sessions/{session_id}").json()
    assert [c["turns"] for c in described["conversations"]] == [2]
    assert described["resends"]["rules"] == {"tools_omitted": 1}


def test_a_refusal_for_other_tools_is_counted_in_resends(serve: ServerFactory) -> None:
    linear = serve()
    session_id = linear.new_session()
    main = [SYSTEM, user("use the tool")]
    main.append(ask(linear, session_id, main, tools=TOOLS))
    other = [{"type": "function", "function": {"name": "grep", "parameters": {"type": "object", "properties": {}}}}]
    with pytest.raises(openai.BadRequestError, match="tools differ"):
        ask(linear, session_id, [*main, user("again")], tools=other)
    assert linear.http.get(f"/sessions/{session_id}").json()["resends"]["failed"] == 1


def test_a_restart_replays_every_conversation_and_its_labels(qwen3_tokenizer: LocalTokenizer, tmp_path: Path) -> None:
    with running_server(qwen3_tokenizer, journal=tmp_path) as live:
        session_id = live.new_session()
        main = [SYSTEM, user("task")]
        main.append(ask(live, session_id, main, tools=TOOLS))
        ask(live, session_id, [user("a title")])
        headers = {"x-claude-code-agent-id": "a-1"}
        ask(live, session_id, [user("sub task")], tools=TOOLS, headers=headers)
        before = conversations(live, session_id)
        kept = samples(live, session_id)
    with running_server(qwen3_tokenizer, journal=tmp_path) as restarted:
        assert conversations(restarted, session_id) == before
        assert samples(restarted, session_id) == kept
        ask(restarted, session_id, [*main, user("more")], tools=TOOLS)
        assert [c["turns"] for c in conversations(restarted, session_id)] == [2, 1, 1]


def test_claude_codes_sub_agent_headers_on_the_messages_route_label_its_conversation(serve: ServerFactory) -> None:
    linear = serve()
    session_id = linear.new_session()

    def messages(text: str, headers: dict[str, str], system: str) -> None:
        body = {"model": "claude-x", "max_tokens": 64, "system": system, "messages": [user(text)]}
        reply = linear.http.post(f"/sessions/{session_id}/v1/messages", json=body, headers=headers)
        assert reply.status_code == 200, reply.text

    session = {"x-claude-code-session-id": "cc-1"}
    messages("the task", session, "x-anthropic-billing-header: cc_version=2.1; You are Claude Code.")
    messages("a title please", session, "Generate a title.")
    sub_headers = {**session, "x-claude-code-agent-id": "a7", "x-claude-code-parent-agent-id": "main"}
    messages("search", sub_headers, "x-anthropic-billing-header: cc_is_subagent=true; You are a sub-agent.")
    labels = [(c["id"], c["kind"], c["parent"], c["source"]) for c in conversations(linear, session_id)]
    assert labels == [
        ("c0", "main", None, "prefix"),
        ("c1", "side", "c0", "prefix"),
        ("c2", "subagent", "c0", "claude-code"),
    ]
