"""A request read with its tools made the process's held ones: equal tools (as JSON too) become one object."""

from __future__ import annotations

import operator
from typing import Any

import orjson

from tito.server.models import ChatCompletionRequest
from tito.server.sessions.shared_tools import with_shared_tools
from tito.trajectory.shared_values import SHARED

TOOLS = [{"type": "function", "function": {"name": "grep", "parameters": {"type": "object", "minLength": 1}}}]


def request(tools: Any) -> ChatCompletionRequest:
    return ChatCompletionRequest.model_validate_json(orjson.dumps({"messages": [{"role": "user"}], "tools": tools}))


def test_two_requests_with_equal_tools_hold_the_same_objects_and_their_own_lists_stay_as_sent() -> None:
    first, second = request(TOOLS), request(TOOLS)
    sent = second.tools
    shared_first, shared_second = with_shared_tools(first), with_shared_tools(second)
    assert shared_first.tools == TOOLS and all(map(operator.is_, shared_first.tools or (), shared_second.tools or ()))
    assert sent is second.tools and sent is not shared_second.tools, "the request read is not changed"
    assert SHARED.held_tuple(shared_second.tools or []) == tuple(TOOLS)


def test_tools_equal_in_python_but_not_as_json_stay_apart_and_no_tools_is_left_as_is() -> None:
    as_float = [{**TOOLS[0], "function": {**TOOLS[0]["function"], "parameters": {"type": "object", "minLength": 1.0}}}]
    assert as_float == TOOLS
    held, apart = with_shared_tools(request(TOOLS)), with_shared_tools(request(as_float))
    assert held.tools and apart.tools and held.tools[0] is not apart.tools[0]
    assert orjson.dumps(apart.tools) == orjson.dumps(as_float)
    bare = request(None)
    assert with_shared_tools(bare) is bare
