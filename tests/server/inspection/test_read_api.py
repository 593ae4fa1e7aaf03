"""The read API over real HTTP: the session list, a session's tree, a turn's tokens; the key rule; and the same
answers from `tito inspect` over the journal the server wrote.

Every expectation is checked against what the server hands a trainer (`POST /samples`) or what the tokenizer says,
never against the read API's own numbers.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.journal.events import LEGACY_HUGE, write_legacy_journal
from tests.server.conftest import Server, ServerFactory, running_server
from tests.server.inspector_scenario import TreeScenario, linear_session, tree_session, user
from tests.server.turns.test_completions import as_message, client
from tito.cli import main
from tito.journal.export import encode, export_samples
from tito.server.commands.inspect import build_inspect_app
from tito.server.commands.running import serve_in_thread
from tito.server.inspection.export_sessions import ExportFileError, ExportSessions
from tito.server.inspection.read_api import JournalSessions
from tito.tokenizer import get_tito_tokenizer
from tito.tokenizer_loading import LocalTokenizer
from tito.trajectory.exports import PROJECTIONS


@pytest.fixture(scope="module")
def scenario(server: Server) -> TreeScenario:
    return tree_session(server)


def get(server: Server, path: str) -> Any:
    response = server.http.get(path)
    assert response.status_code == 200, response.text
    return response.json()


def samples_of(server: Server, session_id: str) -> list[dict[str, Any]]:
    response = server.http.post(f"/sessions/{session_id}/samples")
    assert response.status_code == 200, response.text
    return list(response.json()["samples"])


def test_the_list_shows_each_live_session_with_its_turns_tokens_and_last_activity(server: Server) -> None:
    before = time.time()
    session_id = linear_session(server, turns=3)
    (sample,) = samples_of(server, session_id)
    rows = {row["session_id"]: row for row in get(server, "/sessions")["sessions"]}
    row = rows[session_id]
    assert (row["status"], row["trajectory"], row["turns"]) == ("live", "linear", 3)
    assert row["tokens"] == len(sample["tokens"])
    assert row["sampled_tokens"] == sum(sample["loss_mask"])
    assert row["samples_taken"] == 1 and row["reward"] is None
    assert before <= row["last_activity"] <= time.time()
    rewarded = server.http.post(f"/sessions/{session_id}/samples", json={"reward": 0.75})
    assert rewarded.status_code == 200
    row = next(row for row in get(server, "/sessions")["sessions"] if row["session_id"] == session_id)
    assert (row["samples_taken"], row["reward"]) == (2, 0.75)


def test_the_tree_shows_the_retry_superseded_the_branch_and_the_leaves_the_picker_keeps(
    server: Server, scenario: TreeScenario
) -> None:
    tree = get(server, f"/sessions/{scenario.session_id}")["tree"]
    nodes = {node["node_id"]: node for node in tree["nodes"]}
    assert nodes[0]["children"] == [1, 2, 4] and nodes[3]["parent_id"] == 2
    trained_leaves = [sample["metadata"]["turns"][-1]["node_id"] for sample in samples_of(server, scenario.session_id)]
    assert tree["kept_leaves"] == trained_leaves == list(scenario.kept_leaves)
    assert nodes[scenario.superseded_retry]["fate"] == "dropped"
    assert {node_id for node_id, node in nodes.items() if node["fate"] == "kept"} == {0, 2, 3, 4}
    assert [nodes[n]["appended_roles"] for n in range(5)] == [["user"], ["tool"], ["tool"], ["user"], ["user"]]
    assert nodes[0]["finish_reason"] == "tool_calls" and nodes[0]["invalid_tool_calls"] == 1
    assert all(node["role"] == "assistant" and "engine" in node["timings"] for node in nodes.values())
    assert tree["active_path"] == [0, 4]


def test_a_kept_leafs_turn_holds_its_samples_tokens_loss_mask_and_logprobs(
    server: Server, scenario: TreeScenario
) -> None:
    for sample in samples_of(server, scenario.session_id):
        leaf = sample["metadata"]["turns"][-1]["node_id"]
        tokens = get(server, f"/sessions/{scenario.session_id}/turns/{leaf}")["tokens"]
        assert tokens["ids"] == sample["tokens"]
        assert tokens["loss_mask"] == sample["loss_mask"]
        assert tokens["logprobs"] == pytest.approx(sample["rollout_logprobs"], abs=1e-5)
    # The second leaf shares node 0 with the first: trained there once, so 0 here, as its sample says.
    branch = get(server, f"/sessions/{scenario.session_id}/turns/4")
    first_span = branch["spans"][0]
    assert sum(branch["tokens"]["loss_mask"][first_span["sampled_start"] : first_span["end"]]) == 0


def test_pieces_decode_each_id_and_the_junction_is_the_newline_qwen3_inserts(
    server: Server, scenario: TreeScenario, qwen3_tokenizer: LocalTokenizer
) -> None:
    turn = get(server, f"/sessions/{scenario.session_id}/turns/3")
    tokens = turn["tokens"]
    assert tokens["pieces"] == [qwen3_tokenizer.decode([token]) for token in tokens["ids"]]
    assert "".join(tokens["pieces"]) == qwen3_tokenizer.decode(tokens["ids"])
    assert [span["node_id"] for span in turn["spans"]] == turn["path"] == [0, 2, 3]
    for span in turn["spans"][1:]:
        start, end = span["prompt_start"], span["junction_end"]
        assert tokens["pieces"][start - 1 : end + 1] == ["<|im_end|>", "\n", "<|im_start|>"]
        assert span["dropped_ids"] == 0
    assert turn["spans"][0]["junction_end"] == 0  # a root has no junction


def test_each_message_points_at_its_turns_tokens(server: Server, scenario: TreeScenario) -> None:
    turn = get(server, f"/sessions/{scenario.session_id}/turns/3")
    roles = [(entry["node_id"], entry["message"]["role"]) for entry in turn["messages"]]
    assert roles == [(0, "user"), (0, "assistant"), (2, "tool"), (2, "assistant"), (3, "user"), (3, "assistant")]
    pieces = turn["tokens"]["pieces"]
    last_start, last_end = turn["messages"][-1]["tokens"]
    assert "".join(pieces[last_start:last_end]).startswith("<think>")
    assert "And tomorrow?" in "".join(pieces[slice(*turn["messages"][-2]["tokens"])])


def test_tool_call_attempts_carry_their_parse_status(server: Server, scenario: TreeScenario) -> None:
    attempts = get(server, f"/sessions/{scenario.session_id}/turns/{scenario.tool_node}")["tool_call_attempts"]
    assert [(a["status"], a["name"]) for a in attempts] == [("ok", "get_weather"), ("invalid_arguments", "get_weather")]
    assert attempts[0]["arguments"] == '{"city": "Paris"}' and "JSON" in attempts[1]["detail"]


def test_bad_node_ids_and_sessions_are_named_with_the_right_status(server: Server, scenario: TreeScenario) -> None:
    base = f"/sessions/{scenario.session_id}/turns"
    missing = server.http.get(f"{base}/99")
    assert missing.status_code == 404 and "no node 99" in missing.json()["error"]["message"]
    wrong = server.http.get(f"{base}/first")
    assert wrong.status_code == 400 and "'first'" in wrong.json()["error"]["message"]
    for not_ascii in ("%C2%B9", "%D9%A1", "%EF%BC%91"):  # superscript one, Arabic-Indic one, fullwidth one
        assert server.http.get(f"{base}/{not_ascii}").status_code == 400, not_ascii
    assert server.http.get("/sessions/nope/turns/0").status_code == 404
    gone = server.new_session()
    assert server.http.delete(f"/sessions/{gone}").status_code == 204
    assert server.http.get(f"/sessions/{gone}/turns/0").status_code == 410


def test_the_read_api_needs_the_key_and_the_page_shell_holds_no_data(serve: ServerFactory) -> None:
    keyed = serve(api_key="s3cret")
    headers = {"Authorization": "Bearer s3cret"}
    session_id = keyed.http.post("/sessions", headers=headers).json()["session_id"]
    for path in ("/sessions", f"/sessions/{session_id}", f"/sessions/{session_id}/turns/0"):
        assert keyed.http.get(path).status_code == 401, path
        assert keyed.http.get(path, headers={"Authorization": "Bearer wrong"}).status_code == 401, path
    assert keyed.http.get("/sessions", headers=headers).status_code == 200
    page = keyed.http.get("/ui")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert session_id not in page.text
    script = keyed.http.get("/ui/assets/inspector.js")
    assert script.status_code == 200 and "Authorization" in script.text
    assert keyed.http.get("/ui/assets/missing.js").status_code == 404
    assert keyed.http.get("/uix").status_code == 401  # only /ui and /ui/... are the page


def test_reading_the_list_a_turn_or_an_untouched_describe_does_not_keep_a_session_alive(serve: ServerFactory) -> None:
    expiring = serve(session_ttl=0.4)
    session_id = linear_session(expiring, turns=1)
    deadline = time.monotonic() + 1.0  # 2.5 TTLs: an expired session answers 410 before the sweeper runs
    while time.monotonic() < deadline:
        expiring.http.get("/sessions")
        expiring.http.get(f"/sessions/{session_id}/turns/0")
        expiring.http.get(f"/sessions/{session_id}?touch=false")
        time.sleep(0.1)
    assert expiring.http.get(f"/sessions/{session_id}").status_code == 410


def _linear_with_a_retry(server: Server) -> str:
    """Three linear turns, the last one retried: the journal keeps the superseded turn, the live session does not."""
    session_id = server.new_session(trajectory="linear")
    sdk = client(server, session_id)
    messages: list[dict[str, Any]] = []
    for index in range(3):
        messages.append(user(f"question {index}"))
        messages.append(as_message(sdk.chat.completions.create(model="m", messages=messages)))
    sdk.chat.completions.create(model="m", messages=messages[:-1])
    return session_id


def _without_clock(body: dict[str, Any]) -> dict[str, Any]:
    """Without what only a live server knows: clocks, and the resend counts (memory only,
    tito.server.sessions.resends)."""
    summary = {key: value for key, value in body["summary"].items() if key not in ("last_activity", "superseded_turns")}
    rest = {key: value for key, value in body.items() if key != "resends"}
    return {**rest, "summary": summary, "tree": {**body["tree"], "nodes": body["tree"]["nodes"]}}


def test_tito_inspect_answers_like_the_server_over_its_journal_and_shows_superseded_retries(
    qwen3_tokenizer: LocalTokenizer, tmp_path: Path
) -> None:
    with running_server(qwen3_tokenizer, journal=tmp_path) as server:
        scenario = tree_session(server)
        retried = _linear_with_a_retry(server)
        live_tree = get(server, f"/sessions/{scenario.session_id}")
        live_turns = [get(server, f"/sessions/{scenario.session_id}/turns/{n}") for n in range(5)]
        live_linear = get(server, f"/sessions/{retried}")
    source = JournalSessions(tmp_path, get_tito_tokenizer(qwen3_tokenizer, "qwen3"))
    with serve_in_thread(build_inspect_app(source)) as url, httpx.Client(base_url=url) as offline:
        rows = {row["session_id"]: row for row in offline.get("/sessions").json()["sessions"]}
        assert set(rows) == {scenario.session_id, retried}
        assert _without_clock(offline.get(f"/sessions/{scenario.session_id}").json()) == _without_clock(live_tree)
        for node_id, live_turn in enumerate(live_turns):
            assert offline.get(f"/sessions/{scenario.session_id}/turns/{node_id}").json() == live_turn
        linear = offline.get(f"/sessions/{retried}").json()
        fates = [(node["node_id"], node["fate"]) for node in linear["tree"]["nodes"]]
        assert fates == [(0, "kept"), (1, "kept"), (2, "superseded"), (3, "kept")]
        assert rows[retried]["superseded_turns"] == 1 and rows[retried]["turns"] == len(live_linear["turns"]) == 3
        superseded = offline.get(f"/sessions/{retried}/turns/2").json()
        assert superseded["path"] == [0, 1, 2] and sum(superseded["tokens"]["loss_mask"]) > 0


def test_tito_inspect_without_a_family_shows_ids_and_the_recorded_tool_calls(
    qwen3_tokenizer: LocalTokenizer, tmp_path: Path
) -> None:
    with running_server(qwen3_tokenizer, journal=tmp_path) as server:
        scenario = tree_session(server)
    with serve_in_thread(build_inspect_app(JournalSessions(tmp_path), api_key="k")) as url:
        assert httpx.get(f"{url}/sessions").status_code == 401
        turn = httpx.get(f"{url}/sessions/{scenario.session_id}/turns/0", headers={"Authorization": "Bearer k"}).json()
    assert turn["tokens"]["pieces"] is None and turn["tokenizer"] is None
    assert [a["status"] for a in turn["tool_call_attempts"]] == ["in_message", "invalid_arguments"]


def test_the_tito_inspect_command_serves_a_journal_until_stopped(
    qwen3_tokenizer: LocalTokenizer, tmp_path: Path
) -> None:
    with running_server(qwen3_tokenizer, journal=tmp_path) as server:
        session_id = linear_session(server, turns=2)
    command = [sys.executable, "-m", "tito", "inspect", str(tmp_path), "--family", "qwen3"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        found = re.search(r"open (http://127\.0\.0\.1:\d+)/ui", line)
        assert found, line + (process.stderr.read() if process.poll() is not None and process.stderr else "")
        rows = httpx.get(f"{found.group(1)}/sessions", timeout=10).json()["sessions"]
        assert [(row["session_id"], row["turns"]) for row in rows] == [(session_id, 2)]
        assert httpx.get(f"{found.group(1)}/ui", timeout=10).status_code == 200
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_tito_inspect_refuses_a_directory_that_is_not_a_journal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["inspect", str(tmp_path / "missing")]) == 1
    assert "no journal directory" in capsys.readouterr().err


@pytest.mark.parametrize("format", ["jsonl", "safetensors"])
def test_tito_inspect_over_an_export_shows_each_kept_leaf_exactly_as_exported(
    qwen3_tokenizer: LocalTokenizer, tmp_path: Path, format: str
) -> None:
    journal = tmp_path / "journal"
    started = time.time()
    with running_server(qwen3_tokenizer, journal=journal) as server:
        scenario = tree_session(server)
        linear_id = linear_session(server, turns=2)
    samples, damage = export_samples(journal, time.time(), include_live=True)
    assert damage is None
    exported = tmp_path / f"samples.{format}"
    exported.write_bytes(encode(samples, format))
    source = ExportSessions(exported, get_tito_tokenizer(qwen3_tokenizer, "qwen3"))
    with serve_in_thread(build_inspect_app(source)) as url, httpx.Client(base_url=url) as offline:
        rows = {row["session_id"]: row for row in offline.get("/sessions").json()["sessions"]}
        assert {key: rows[key]["samples_taken"] for key in rows} == {scenario.session_id: 2, linear_id: 1}
        assert all(started <= row["last_activity"] <= time.time() for row in rows.values())  # the spans' commit times
        tree = offline.get(f"/sessions/{scenario.session_id}").json()["tree"]
        assert tree["kept_leaves"] == [3, 4]  # the superseded retry is in no sample, so not in the export
        assert [(node["node_id"], node["parent_id"]) for node in tree["nodes"]] == [(0, None), (2, 0), (3, 2), (4, 0)]
        for sample in samples:
            leaf = sample.metadata["turns"][-1]["node_id"]
            turn = offline.get(f"/sessions/{sample.metadata['session_id']}/turns/{leaf}").json()
            assert turn["tokens"]["ids"] == sample.tokens.tolist()
            assert turn["tokens"]["loss_mask"] == sample.loss_mask.tolist()
            assert "".join(turn["tokens"]["pieces"]) == qwen3_tokenizer.decode(sample.tokens.tolist())
            assert turn["messages"][-1]["message"]["role"] == "assistant"
        first = offline.get(f"/sessions/{scenario.session_id}/turns/0").json()
        assert [a["status"] for a in first["tool_call_attempts"]] == ["ok", "invalid_arguments"]


def test_an_export_line_that_is_not_a_sample_is_named(tmp_path: Path) -> None:
    exported = tmp_path / "samples.jsonl"
    exported.write_text('{"tokens": [1]}\n', encoding="utf-8")
    with pytest.raises(ExportFileError, match=r"samples.jsonl line 1: .*KeyError"):
        ExportSessions(exported)


def test_values_stored_before_range_checks_read_back_on_every_route(
    qwen3_tokenizer: LocalTokenizer, tmp_path: Path
) -> None:
    """A journal holding a `max_nodes` and a `seed` beyond 64 bits: the restarted server reads them back exactly."""
    poisoned, _ = write_legacy_journal(tmp_path / "journal")
    with running_server(qwen3_tokenizer, journal=tmp_path / "journal") as server:
        assert get(server, f"/sessions/{poisoned}")["max_nodes"] == LEGACY_HUGE
        assert get(server, f"/sessions/{poisoned}/turns/0")["node_id"] == 0
        assert any(row["session_id"] == poisoned for row in get(server, "/sessions")["sessions"])
        for format in ("json", "safetensors", *PROJECTIONS):
            reply = server.http.post(f"/sessions/{poisoned}/samples", json={"format": format, "reward": 1.0})
            assert reply.status_code == 200, (format, reply.text)
        spans = server.http.post(f"/sessions/{poisoned}/samples").json()["samples"][0]["spans"]
        assert spans[0]["sampling"]["seed"] == LEGACY_HUGE
