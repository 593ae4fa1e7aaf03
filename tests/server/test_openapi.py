"""/openapi.json describes every route the app serves: its request body, path and query parameters and every status
it answers with the error body's shape (Anthropic's on its routes); real error replies match what it documents."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from fastapi.routing import APIRoute

from tests.server.conftest import Server
from tito.server.app import create_app
from tito.server.openapi import ROUTES


@pytest.fixture(scope="module")
def schema(server: Server) -> dict[str, Any]:
    reply = server.http.get("/openapi.json")
    assert reply.status_code == 200
    return dict(reply.json())


def test_the_schema_documents_exactly_the_apps_routes(server: Server, schema: dict[str, Any]) -> None:
    app = create_app(server.state)  # the same routes as the running server's app (routes are not started)
    served = {
        (method, route.path)
        for route in app.routes
        if isinstance(route, APIRoute) and route.include_in_schema
        for method in route.methods
    }
    assert served == set(ROUTES)
    in_schema = {(method.upper(), path) for path, item in schema["paths"].items() for method in item}
    assert in_schema == served


def test_every_operation_documents_its_body_parameters_and_error_statuses(schema: dict[str, Any]) -> None:
    components = schema["components"]["schemas"]
    for (method, path), operation in ROUTES.items():
        described = schema["paths"][path][method.lower()]
        path_names = {p["name"] for p in described.get("parameters", ()) if p["in"] == "path"}
        assert path_names == {part[1:-1] for part in path.split("/") if part.startswith("{")}, path
        if operation.body is not None:
            ref = described["requestBody"]["content"]["application/json"]["schema"]["$ref"]
            assert ref.rsplit("/", 1)[1] in components
        assert "422" not in described["responses"] or 422 in operation.statuses  # FastAPI's own 422 never answers
        for status in operation.statuses:
            reply = described["responses"][str(status)]
            if status != 204:
                shape = reply["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
                assert shape == ("AnthropicError" if operation.anthropic and status != 401 else "Error"), (path, status)
    assert components["ChatCompletionRequest"]["properties"]["seed"]["anyOf"][0]["maximum"] == 2**63 - 1


def error_schema(schema: dict[str, Any], name: str) -> dict[str, Any]:
    return dict(schema["components"]["schemas"][name])


@pytest.mark.parametrize(
    ("path", "body", "status", "shape"),
    [
        ("v1/chat/completions", {"messages": []}, 400, "Error"),
        ("v1/messages", {"messages": [{"role": "user", "content": "x"}]}, 400, "AnthropicError"),
        ("v1/messages/count_tokens", {"messages": "x"}, 400, "AnthropicError"),
        ("v1/responses", {"input": 5}, 400, "Error"),
        ("samples", {"reward": "x"}, 400, "Error"),
    ],
)
def test_an_error_reply_has_the_documented_shape(
    server: Server, schema: dict[str, Any], path: str, body: dict[str, Any], status: int, shape: str
) -> None:
    session_id = server.new_session()
    reply = server.http.post(f"/sessions/{session_id}/{path}", json=body)
    assert reply.status_code == status, reply.text
    jsonschema.validate(reply.json(), error_schema(schema, shape))
    documented = schema["paths"][f"/sessions/{{session_id}}/{path}"]["post"]["responses"]
    assert str(status) in documented
