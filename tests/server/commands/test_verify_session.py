"""`tito verify-session` against an in-test vLLM whose `/tokenize` renders with a chosen chat template.

The engine "samples" a canonical reply (reasoning, then text), so with tito's fixed template every check passes; a
server whose template drops history reasoning (the official Qwen3 one) fails the template check on the turn that
follows an injected assistant with reasoning, naming the token. The real-engine run is scripts/vllm_cpu_check.sh.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.conftest import family_tito, family_tokenizer, reference_path
from tests.engines.fake_engine import FakeServer
from tests.engines.fake_vllm import vllm_app
from tests.engines.servers import ServerThread
from tito.cli import main
from tito.rendering import compile_template, render_template
from tito.server.commands.verify_session import Check, VerifyOptions, run_verify_session

REPLY = "<think>\nThe tool said rain.\n</think>\n\nIt is raining in Oslo.<|im_end|>"


class TemplatedVLLM:
    """The in-test vLLM plus a `/tokenize` that renders messages with `template_source` (None: tito's fixed one)."""

    def __init__(self) -> None:
        self.server = FakeServer(name="vllm")
        self.template_source: str | None = None
        routes = [*vllm_app(self.server).routes, Route("/tokenize", self.tokenize, methods=["POST"])]
        self.thread = ServerThread(Starlette(routes=routes)).start()

    async def tokenize(self, request: Request) -> Response:
        body: dict[str, Any] = await request.json()
        kwargs = body.get("chat_template_kwargs") or {}
        if self.template_source is None:
            ids = family_tito("qwen3").tokenize(body["messages"], body["tools"], add_generation_prompt=True)
        else:
            text = render_template(compile_template(self.template_source), body["messages"], body["tools"],
                                   add_generation_prompt=True, **kwargs)  # fmt: skip
            ids = family_tokenizer("qwen3").encode(text, add_special_tokens=False)
        return JSONResponse({"count": len(ids), "max_model_len": 2048, "tokens": list(ids), "token_strs": None})


@pytest.fixture(scope="module")
def engine() -> Iterator[TemplatedVLLM]:
    engine = TemplatedVLLM()
    yield engine
    engine.thread.stop()


@pytest.fixture
def scripted(engine: TemplatedVLLM, shared_builtin_tokenizers: None) -> TemplatedVLLM:
    engine.server.reset()
    engine.server.behaviour.reply_ids = list(family_tokenizer("qwen3").encode(REPLY, add_special_tokens=False))
    engine.template_source = None
    return engine


def _verify(engine: TemplatedVLLM) -> list[Check]:
    return run_verify_session(VerifyOptions("vllm", engine.thread.url, "qwen3"))


def test_every_check_passes_when_the_engine_serves_the_fixed_template(scripted: TemplatedVLLM) -> None:
    checks = _verify(scripted)
    assert [check for check in checks if check.outcome != "passed"] == []
    assert {check.name for check in checks} == {"template", "merge", "parse", "logprobs", "sample"}
    assert sum(check.name == "template" for check in checks) == 4, "one template check per turn"


def test_a_server_with_the_official_template_fails_naming_the_turn_and_token(scripted: TemplatedVLLM) -> None:
    scripted.template_source = reference_path("templates", "qwen3.jinja").read_text(encoding="utf-8")
    failed = [check for check in _verify(scripted) if check.outcome == "failed"]
    assert failed, "the official template drops history reasoning, so the engine's ids must differ"
    assert {check.name for check in failed} == {"template"}
    assert failed[0].turn >= 2 and failed[0].detail.startswith("token ")


def test_the_command_exits_non_zero_on_a_failure_and_prints_the_table(
    scripted: TemplatedVLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["verify-session", "--engine", "vllm", "--engine-url", scripted.thread.url, "--family", "qwen3"]
    assert main(argv) == 0
    assert "0 failed" in capsys.readouterr().out
    scripted.template_source = reference_path("templates", "qwen3.jinja").read_text(encoding="utf-8")
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "template  failed" in out and "token " in out


def test_an_engine_without_tokenize_skips_the_template_check(scripted: TemplatedVLLM) -> None:
    plain = ServerThread(vllm_app(scripted.server)).start()
    try:
        checks = run_verify_session(VerifyOptions("vllm", plain.url, "qwen3"))
    finally:
        plain.stop()
    assert {check.outcome for check in checks if check.name == "template"} == {"skipped"}
    assert all(check.outcome == "passed" for check in checks if check.name != "template")
