"""Schema fuzzing: schemathesis generates requests from /openapi.json against `tito serve --engine instant`, with and
without `--journal`, bounded in examples per route. No reply is a 5xx or breaks its documented status, content type
or schema; afterwards every session the run used still answers GET and /samples, and the journal exports.

Marked `fuzz` (.ci/run runs it); TITO_FUZZ_EXAMPLES sets the examples per route (default 60). Requests name one of a
few real sessions most of the time (a random id only reaches the 404 path). Anything it ever found is kept as a
plain regression test in tests/server/test_models.py and tests/server/test_replies.py.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import negative_data_rejection, positive_data_acceptance

from tests.server.test_crash import ServeProcess
from tito.cli import main

pytestmark = pytest.mark.fuzz

EXAMPLES = int(os.environ.get("TITO_FUZZ_EXAMPLES", "60"))
SESSIONS = 4
USER = [{"role": "user", "content": "hi"}]


class Served:
    def __init__(self, process: ServeProcess, journal: Path | None) -> None:
        self.process = process
        self.journal = journal
        self.sessions = [self.new_session(trajectory) for trajectory in ("linear", "tree") * (SESSIONS // 2)]

    def new_session(self, trajectory: str) -> str:
        session_id = str(self.process.http.post("/sessions", json={"trajectory": trajectory}).json()["session_id"])
        turn = self.process.http.post(f"/sessions/{session_id}/v1/chat/completions", json={"messages": USER})
        assert turn.status_code == 200, turn.text
        return session_id


@pytest.fixture(scope="module", params=[False, True], ids=["in-memory", "journal"])
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    directory = tmp_path_factory.mktemp("fuzz")
    journal = directory / "journal" if request.param else None
    process = ServeProcess(journal, directory / "serve.log", token_delay=0.0)
    try:
        yield Served(process, journal)
    finally:
        process.stop()


OPERATIONS = [
    ("GET", "/health"), ("GET", "/ready"), ("GET", "/metrics"), ("GET", "/v1/models"),
    ("GET", "/sessions/{session_id}/v1/models"), ("POST", "/sessions"), ("GET", "/sessions"),
    ("GET", "/sessions/{session_id}"), ("GET", "/sessions/{session_id}/turns/{node}"),
    ("POST", "/sessions/{session_id}/v1/chat/completions"), ("POST", "/sessions/{session_id}/v1/messages"),
    ("POST", "/sessions/{session_id}/v1/messages/count_tokens"), ("POST", "/sessions/{session_id}/v1/responses"),
    ("POST", "/sessions/{session_id}/samples"), ("GET", "/load"), ("GET", "/admin/turns"), ("POST", "/admin/drain"),
    ("DELETE", "/sessions/{session_id}"),
]  # fmt: skip
"""Every documented route but `POST /admin/pause` and `/admin/resume` (a pause that holds turns would stall every
later case; tests/server/turns/test_drain.py covers both); DELETE last."""


NOT_CHECKED = [positive_data_acceptance, negative_data_rejection]
"""A request valid by the schema may still be refused (a conversation that does not extend the stored one, a tool
result for no call), and unknown fields and query parameters are ignored by design, as the providers' own servers
do. Checked: no 5xx, and each reply's status, content type and body as documented."""
CASES = [
    pytest.param(method, path, mode, id=f"{mode.value} {method} {path}")
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
    for method, path in OPERATIONS
    if mode is GenerationMode.POSITIVE or method == "POST" or "{node}" in path  # negative: a body or a digits-only id
]


@pytest.mark.parametrize(("method", "path", "mode"), CASES)
def test_no_generated_request_gets_a_5xx_or_a_reply_its_schema_does_not_document(
    served: Served, method: str, path: str, mode: GenerationMode
) -> None:
    api = schemathesis.openapi.from_url(f"{served.process.url}/openapi.json")
    operation = api[path][method]

    @given(operation.as_strategy(generation_mode=mode))
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True,
              database=None)  # fmt: skip
    def run(case: Any) -> None:
        session_id = (case.path_parameters or {}).get("session_id")
        if isinstance(session_id, str) and zlib.crc32(session_id.encode()) % 8:  # 7 in 8 name a real session
            real = (
                served.new_session("tree")
                if method == "DELETE"
                else served.sessions[zlib.crc32(session_id.encode()) % SESSIONS]
            )
            case.path_parameters["session_id"] = real
        case.call_and_validate(base_url=served.process.url, excluded_checks=NOT_CHECKED)

    run()


def test_every_touched_session_still_reads_back_and_the_journal_exports(served: Served, tmp_path: Path) -> None:
    http = served.process.http
    for session_id in served.sessions:
        described = http.get(f"/sessions/{session_id}")
        if described.status_code == 410:  # a generated DELETE ended it: gone is an answer too
            continue
        assert described.status_code == 200, described.text
        assert http.post(f"/sessions/{session_id}/samples").status_code == 200
    if served.journal is not None:
        assert main(["journal", "export", str(served.journal), "--all", "--out", str(tmp_path / "all.jsonl")]) == 0
