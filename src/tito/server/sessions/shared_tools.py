"""A request's tools as the process's held objects, so that what a session keeps of its requests holds no copy.

A session's body readers (`resent_prefix`) and translations keep its last requests; each request's `tools` is an
agent's 25 schemas, ~80 KB as Python objects (and a Responses translation keeps them as chat tools and as JSON).
Made the process's held tools (`trajectory.shared_values`, equal as JSON) when read, they cost nothing per session,
and the same list is found again without being encoded (the plan's check and the commit look it up each turn).

Imports from tito: trajectory.shared_values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, Self, TypeVar

from tito.trajectory.shared_values import SHARED


class ToolsRequest(Protocol):
    """A request that sends tools: chat's, Anthropic's, Responses'."""

    tools: list[dict[str, Any]] | None

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self: ...


Tooled = TypeVar("Tooled", bound=ToolsRequest)


def with_shared_tools(request: Tooled) -> Tooled:
    """`request` with its tools the process's held ones where equal (a new list of them: the request's own list is
    not changed)."""
    if not request.tools:
        return request
    return request.model_copy(update={"tools": held_tools(request.tools)})


def held_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A new list of the process's held objects equal to `tools` (a translation's own tools: Responses' as chat
    tools)."""
    return list(SHARED.held_tuple(tools))


def held_tools_json(tools: list[dict[str, Any]]) -> bytes:
    """`tools` as JSON, written once per process for equal tools (`SharedValues.held_json`)."""
    return SHARED.held_json(tools)
