"""A deterministic agent for the journal tests: the same (index, turn) always sends the same messages, so an
interrupted run and an uninterrupted one can be compared token for token; plus what both runs are compared on."""

from __future__ import annotations

from typing import Any

import httpx
import orjson

from tito.trajectory.codec import SAFETENSORS_MEDIA_TYPE, decode_safetensors
from tito.trajectory.samples import Sample

SYSTEM = "You are a careful agent. Answer briefly."


class Agent:
    """One session's client: sends its next user turn, or resends the one whose reply it never received."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.session_id = ""
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
        self.received: list[str] = []
        """Response ids of the replies this agent received, in order."""
        self.awaiting = False
        """The last request got no reply (the server died): the next request resends it."""

    def open(self, http: httpx.Client) -> None:
        response = http.post("/sessions")
        assert response.status_code == 200, response.text
        self.session_id = response.json()["session_id"]

    def request_body(self) -> dict[str, Any]:
        if not self.awaiting:
            turn = len(self.received)
            self.messages.append({"role": "user", "content": f"Agent {self.index}, step {turn}: report the result."})
            self.awaiting = True
        return {"messages": self.messages}

    @property
    def chat_path(self) -> str:
        return f"/sessions/{self.session_id}/v1/chat/completions"

    def receive(self, reply: dict[str, Any]) -> None:
        message = reply["choices"][0]["message"]
        self.messages.append({key: value for key, value in message.items() if value is not None})
        self.received.append(reply["id"])
        self.awaiting = False

    def turn(self, http: httpx.Client) -> None:
        response = http.post(self.chat_path, json=self.request_body())
        assert response.status_code == 200, response.text
        self.receive(response.json())

    def turn_streamed(self, http: httpx.Client) -> None:
        """The same turn with `stream: true`: received once the stream's `[DONE]` arrived, its message the deltas
        added up."""
        message: dict[str, Any] = {"role": "assistant", "content": ""}
        response_id, done = "", False
        with http.stream("POST", self.chat_path, json={**self.request_body(), "stream": True}) as response:
            assert response.status_code == 200, response.read().decode()
            for line in response.iter_lines():
                if line == "data: [DONE]":
                    done = True
                elif line.startswith("data: "):
                    chunk = orjson.loads(line[6:])
                    assert "error" not in chunk, chunk
                    response_id = chunk["id"]
                    for choice in chunk["choices"]:
                        for key in ("content", "reasoning_content"):
                            if choice["delta"].get(key):
                                message[key] = message.get(key, "") + choice["delta"][key]
        if not done:
            raise httpx.RemoteProtocolError("the stream ended before [DONE]")
        self.receive({"id": response_id, "choices": [{"message": message}]})


def stored_response_ids(http: httpx.Client, session_id: str) -> list[str]:
    response = http.get(f"/sessions/{session_id}")
    assert response.status_code == 200, response.text
    return [turn["response_id"] for turn in response.json()["turns"]]


def samples_of(http: httpx.Client, session_id: str) -> bytes:
    response = http.post(f"/sessions/{session_id}/samples", params={"format": "safetensors"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == SAFETENSORS_MEDIA_TYPE
    return response.content


def comparable(payload: bytes) -> list[tuple[bytes, bytes, bytes, int, str, dict[str, Any]]]:
    """A sample payload with its session id blanked (two runs' sessions have different ids): arrays as raw bytes."""
    return [_comparable(sample) for sample in decode_safetensors(payload)]


def _comparable(sample: Sample) -> tuple[bytes, bytes, bytes, int, str, dict[str, Any]]:
    metadata = {**sample.metadata, "session_id": "-"}
    arrays = (sample.tokens.tobytes(), sample.loss_mask.tobytes(), sample.rollout_logprobs.tobytes())
    return (*arrays, sample.response_length, sample.status, metadata)
