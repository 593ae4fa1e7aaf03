"""One owner per session among processes sharing a journal (in-process servers, one journal directory).

A "crash" here is what the others can see of one: its journal lock is free (the kernel frees it when a process
dies) and its lease is neither renewed nor released; the crashed server is then never spoken to again. The real
thing, `kill -9` of a `tito serve` process behind nginx, is tests/server/test_scale_out.py.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.server.conftest import Server, running_server
from tito.cli import main
from tito.errors import JournalError
from tito.journal import JournalWriter, replay
from tito.journal.leases import Lease, write_lease
from tito.journal.shared import SharedJournalLayout
from tito.server.scaleout import ownership
from tito.server.sessions.routes import SESSION_ID_HEADER
from tito.tokenizer_loading import LocalTokenizer
from tito.trajectory.events import SessionCreated


@pytest.fixture
def cluster(qwen3_tokenizer: LocalTokenizer, tmp_path: Path) -> Iterator[Any]:
    """`start(name)`: a server sharing the journal in tmp_path, ready; all stopped at the end."""
    with contextlib.ExitStack() as stack:

        def start(name: str) -> Server:
            server = stack.enter_context(
                running_server(qwen3_tokenizer, journal=tmp_path, journal_shared=True, process_name=name)
            )
            deadline = time.monotonic() + 10
            while server.http.get("/ready").status_code != 200:
                assert time.monotonic() < deadline, "the server did not become ready"
                time.sleep(0.01)
            return server

        yield start


def crash(server: Server) -> None:
    """What a crash leaves: the lease unrenewed (not released), the stream's lock free."""
    sink: Any = server.state.registry.sink
    sink.keeper.stop(release=False)
    sink.writer.close()


def user(content: str) -> dict[str, str]:
    return {"role": "user", "content": content}


def take_turn(server: Server, session_id: str, messages: list[dict[str, Any]]) -> httpx.Response:
    return server.http.post(f"/sessions/{session_id}/v1/chat/completions", json={"messages": messages})


def converse(server: Server, session_id: str, turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for turn in range(turns):
        messages.append(user(f"step {turn}"))
        response = take_turn(server, session_id, messages)
        assert response.status_code == 200, response.text
        messages.append({k: v for k, v in response.json()["choices"][0]["message"].items() if v is not None})
    return messages


def until_taken_over(server: Server, session_id: str, messages: list[dict[str, Any]]) -> list[httpx.Response]:
    """Send the turn until the reply is not a TakeoverPendingError (a 503); every reply, in order."""
    replies = [take_turn(server, session_id, messages)]
    deadline = time.monotonic() + 10
    while is_pending(replies[-1]) and time.monotonic() < deadline:
        time.sleep(int(replies[-1].headers["retry-after-ms"]) / 1000)
        replies.append(take_turn(server, session_id, messages))
    return replies


def is_pending(reply: httpx.Response) -> bool:
    return reply.status_code == 503 and reply.json()["error"]["type"] == "TakeoverPendingError"


def stored_response_ids(server: Server, session_id: str) -> list[str]:
    response = server.http.get(f"/sessions/{session_id}")
    assert response.status_code == 200, response.text
    return [turn["response_id"] for turn in response.json()["turns"]]


def test_a_dead_processes_session_answers_a_retryable_503_then_continues_where_it_stopped(cluster: Any) -> None:
    first, second = cluster("first"), cluster("second")
    session_id = first.new_session()
    messages = converse(first, session_id, 2)
    before = stored_response_ids(first, session_id)
    prompt_before = first.engine.requests[-1].prompt_ids
    crash(first)

    replies = until_taken_over(second, session_id, [*messages, user("step 2")])
    assert replies[0].status_code == 503 and replies[0].json()["error"]["type"] == "TakeoverPendingError"
    assert int(replies[0].headers["retry-after"]) >= 1 and int(replies[0].headers["retry-after-ms"]) > 0
    assert replies[-1].status_code == 200, replies[-1].text
    assert replies[-1].headers["x-tito-process"] == "second"
    assert stored_response_ids(second, session_id)[:2] == before
    prompt_after = second.engine.requests[-1].prompt_ids
    assert list(prompt_after[: len(prompt_before)]) == list(prompt_before), "the stored ids carry over exactly"
    assert 'tito_sessions_taken_over_total{process="second"} 1.0' in second.http.get("/metrics").text


def test_a_session_deleted_before_the_crash_stays_gone_and_an_unknown_one_is_404(cluster: Any) -> None:
    first, second = cluster("first"), cluster("second")
    deleted, kept = first.new_session(), first.new_session()
    assert first.http.delete(f"/sessions/{deleted}").status_code == 204
    crash(first)
    assert until_taken_over(second, kept, [user("hi")])[-1].status_code == 200
    assert second.http.get(f"/sessions/{deleted}").status_code == 410
    assert second.http.get(f"/sessions/{'f' * 32}").status_code == 404


def test_an_unreadable_dead_stream_is_reported_once_with_its_path_and_not_read_per_request(
    cluster: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Before: every unknown session id answered 503 and fenced and re-read the broken stream, forever."""
    first, second = cluster("first"), cluster("second")
    first.new_session()
    crash(first)
    reads: list[int] = []

    def unreadable(layout: SharedJournalLayout, epoch: int) -> Any:
        reads.append(epoch)
        raise JournalError(f"segment {layout.stream_dir(epoch)}/00000000.log: bad record at offset 12")

    monkeypatch.setattr(ownership, "read_dead_stream", unreadable)
    statuses = []
    for index in range(6):
        statuses.append(second.http.get(f"/sessions/{index:032x}").status_code)
        time.sleep(0.05)
    assert len(reads) == 1, reads
    assert statuses[0] == 503 and statuses[-3:] == [404, 404, 404], statuses
    reports = [record.getMessage() for record in caplog.records if "is unreadable" in record.getMessage()]
    assert (
        len(reports) == 1 and str(SharedJournalLayout(second.state.options.journal).stream_dir(reads[0])) in reports[0]
    )


def test_a_session_taken_over_by_a_live_process_is_not_taken_again(cluster: Any) -> None:
    first, second = cluster("first"), cluster("second")
    session_id = first.new_session()
    crash(first)
    assert until_taken_over(second, session_id, [user("hi")])[-1].status_code == 200
    third = cluster("third")
    reply = until_taken_over(third, session_id, [user("hi")])[-1]
    assert reply.status_code == 503 and reply.json()["error"]["type"] == "SessionHeldElsewhereError"
    assert "second" in reply.json()["error"]["message"]


def test_a_session_follows_its_owners_through_two_crashes(cluster: Any) -> None:
    first, second = cluster("first"), cluster("second")
    session_id = first.new_session()
    messages = converse(first, session_id, 1)
    crash(first)
    messages.append(user("step 1"))
    reply = until_taken_over(second, session_id, messages)[-1]
    assert reply.status_code == 200
    messages.append(reply.json()["choices"][0]["message"])
    received = stored_response_ids(second, session_id)
    crash(second)
    third = cluster("third")
    assert until_taken_over(third, session_id, [*messages, user("step 2")])[-1].status_code == 200
    assert stored_response_ids(third, session_id)[:2] == received


def test_a_restarted_process_takes_its_own_sessions_back_before_it_is_ready(cluster: Any) -> None:
    first = cluster("worker-0")
    sessions = [first.new_session() for _ in range(3)]
    crash(first)
    again = cluster("worker-0")  # ready only once its earlier life's sessions are back
    for session_id in sessions:
        assert again.http.get(f"/sessions/{session_id}").status_code == 200, "served at once, no 503"


def test_the_router_minted_session_id_names_the_session_once(cluster: Any) -> None:
    server = cluster("solo")
    minted = "0123456789abcdef0123456789abcdef"
    created = server.http.post("/sessions", headers={SESSION_ID_HEADER: minted})
    assert created.status_code == 200 and created.json()["session_id"] == minted
    again = server.http.post("/sessions", headers={SESSION_ID_HEADER: minted})
    assert again.status_code == 409 and again.json()["error"]["type"] == "SessionIdTakenError"
    bad = server.http.post("/sessions", headers={SESSION_ID_HEADER: "../escape"})
    assert bad.status_code == 400 and "X-Tito-Session-Id" in bad.json()["error"]["message"]


def test_a_takeover_cut_short_by_a_second_crash_is_redone_from_the_whole_source(cluster: Any, tmp_path: Path) -> None:
    """An adopter killed mid-copy leaves a pending claim and part of the session in its stream; the next taker
    ignores that part and claims the session again from the stream that still holds it whole."""
    first = cluster("first")
    session_id = first.new_session()
    messages = converse(first, session_id, 2)
    received = stored_response_ids(first, session_id)
    crash(first)
    layout = SharedJournalLayout(tmp_path)
    source = layout.stream_epochs()[-1]
    adopter = layout.next_epoch()  # the life that died mid-copy: its claim, its note, the first event only
    created = next(e for e in replay(layout.stream_dir(source)).events if isinstance(e, SessionCreated))
    with JournalWriter(layout.stream_dir(adopter)) as writer:
        writer.append_blocking(created)
    layout.record_copy(adopter, session_id, source)
    layout.claim(source, session_id, adopter, is_dead=lambda epoch: True)
    write_lease(layout.lease_path(adopter), Lease(adopter, "died", 1, socket.gethostname(), 0.0, 2.0, released=True))

    third = cluster("third")
    reply = until_taken_over(third, session_id, [*messages, user("step 2")])[-1]
    assert reply.status_code == 200, reply.text
    assert stored_response_ids(third, session_id)[:2] == received
    claim = layout.read_claim(source, session_id)
    assert claim is not None and claim.generation == 2 and claim.complete


def test_a_taken_over_sessions_journal_export_replays_the_samples_request_its_adopter_got(
    cluster: Any, tmp_path: Path
) -> None:
    """Sampled once before the crash and again, with rewards, a group and a budget, on the process that took it
    over: an export of the adopter's stream equals the adopter's reply (the journal keeps each `/samples` body)."""
    first, second = cluster("first"), cluster("second")
    session_id = first.new_session()
    messages = converse(first, session_id, 2)
    assert first.http.post(f"/sessions/{session_id}/samples", json={"reward": 0.0}).status_code == 200
    crash(first)
    assert until_taken_over(second, session_id, [*messages, user("step 2")])[-1].status_code == 200
    (whole,) = second.http.post(f"/sessions/{session_id}/samples").json()["samples"]
    first_span, second_span = whole["spans"][:2]
    asked = {"rewards": {second_span["response_id"]: 1.0}, "group_id": "g-9", "format": "verl",
             "response_length": second_span["end"] - first_span["start"]}  # fmt: skip
    reply = second.http.post(f"/sessions/{session_id}/samples", json=asked)
    assert reply.status_code == 200, reply.text
    sink: Any = second.state.registry.sink
    stream = SharedJournalLayout(tmp_path).stream_dir(sink.keeper.lease.epoch)
    out = tmp_path / "export.json"
    code = main(["journal", "export", str(stream), "--all", "--format", "verl", "--session", session_id,
                 "--out", str(out)])  # fmt: skip
    assert code == 0
    (record,) = orjson.loads(out.read_bytes())
    assert [record] == reply.json()["samples"]
    assert record["reward_score"] == 1.0 and record["extra_fields"]["uid"] == "g-9"
