"""Weight versions reach the sample from the engines' own wire formats: SGLang's `meta_info.weight_version` (whole
replies and streams) and vLLM's generate-endpoint `weight_versions`, per span and folded into the metadata; an
engine that reports none gives null (tests/server/test_sample_spans.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.engines.fake_engine import FakeServer
from tests.engines.servers import start_fake
from tito.engines.protocol import Engine
from tito.engines.sglang import SGLangEngine
from tito.engines.vllm import VLLMEngine
from tito.server import ServerOptions, ServerState, create_app
from tito.server.commands.launch import instant_reply_ids
from tito.server.commands.running import serve_in_thread
from tito.tokenizer import get_tito_tokenizer
from tito.tokenizer_loading import LocalTokenizer


@pytest.fixture(scope="module", params=["sglang", "vllm"])
def engine_server(request: pytest.FixtureRequest) -> Iterator[tuple[str, FakeServer]]:
    fake, thread = start_fake(request.param)
    try:
        yield request.param, fake
    finally:
        thread.stop()


def build_engine(kind: str, url: str) -> Engine:
    if kind == "sglang":
        return SGLangEngine(url, model="tiny")
    return VLLMEngine(url, model="tiny", endpoint="generate")


def test_each_turns_weight_version_comes_from_the_engines_reply(
    engine_server: tuple[str, FakeServer], qwen3_tokenizer: LocalTokenizer
) -> None:
    kind, fake = engine_server
    fake.reset()
    fake.behaviour.reply_ids = instant_reply_ids(get_tito_tokenizer(qwen3_tokenizer, "qwen3"))
    state = ServerState(qwen3_tokenizer, build_engine(kind, fake.url), ServerOptions(family="qwen3"))
    streams = [False, True] if kind == "sglang" else [False, False]  # tito streams vLLM over /v1/completions
    with serve_in_thread(create_app(state)) as url:
        session_id = httpx.post(f"{url}/sessions").json()["session_id"]
        sdk = openai.OpenAI(base_url=f"{url}/sessions/{session_id}/v1", api_key="unused", max_retries=0)
        messages: list[Any] = []
        for version, stream in zip(["step-7", "step-8"], streams, strict=True):
            fake.behaviour.weight_version = version
            messages.append({"role": "user", "content": f"turn at {version}"})
            if stream:
                chunks = list(sdk.chat.completions.create(model="m", messages=messages, stream=True))
                content = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
                messages.append({"role": "assistant", "content": content})
            else:
                reply = sdk.chat.completions.create(model="m", messages=messages)
                messages.append(reply.choices[0].message.model_dump(exclude_none=True))
        response = httpx.post(f"{url}/sessions/{session_id}/samples", json={"format": "miles"})
    assert response.status_code == 200, response.text
    (sample,) = response.json()["samples"]
    spans = sample["metadata"]["tito"]["spans"]
    assert [span["weight_version"] for span in spans] == ["step-7", "step-8"]
    assert [span["weight_versions"] for span in spans] == [["step-7"], ["step-8"]]
    assert sample["metadata"]["weight_versions"] == sample["weight_versions"] == ["step-7", "step-8"]
