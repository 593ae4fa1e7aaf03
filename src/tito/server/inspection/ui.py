"""The inspector page at `GET /ui`: plain HTML, CSS and JavaScript shipped in the wheel (`server/inspection/ui/`), no
build step.

The page is a static shell with no session data: it asks for the API key (when the server has one) and reads
everything through the read API with `Authorization: Bearer <key>`, so the data keeps the one key rule. The shell
itself is served by an outermost middleware, ahead of the key check, because a browser cannot send a bearer header
when it opens a URL. Files are read once at startup.

Imports nothing from tito.
"""

from __future__ import annotations

from importlib import resources

from starlette.types import ASGIApp, Receive, Scope, Send

_TYPES = {
    "html": "text/html; charset=utf-8",
    "js": "text/javascript; charset=utf-8",
    "css": "text/css; charset=utf-8",
    "svg": "image/svg+xml",
}


def _load_assets() -> dict[str, tuple[bytes, str]]:
    """`/ui` and `/ui/assets/<file>` -> (body, content type), from the package's `ui` folder."""
    folder = resources.files("tito.server.inspection").joinpath("ui")
    assets: dict[str, tuple[bytes, str]] = {}
    for entry in folder.iterdir():
        suffix = entry.name.rpartition(".")[2]
        if entry.is_file() and suffix in _TYPES:
            assets[f"/ui/assets/{entry.name}"] = (entry.read_bytes(), _TYPES[suffix])
    assets["/ui"] = assets.pop("/ui/assets/index.html")
    return assets


class InspectorPageMiddleware:
    """Answers `GET /ui` (and `/ui/`) and `GET /ui/assets/<file>`; passes every other request on."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.assets = _load_assets()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path == "/ui/":  # the page's relative asset links resolve from /ui
            await send({"type": "http.response.start", "status": 308, "headers": [(b"location", b"../ui")]})
            await send({"type": "http.response.body", "body": b""})
            return
        asset = self.assets.get(path) if scope.get("method") in ("GET", "HEAD") else None
        if asset is None:
            if path == "/ui" or path.startswith("/ui/"):
                await self._send(send, 404, b"no such inspector file", "text/plain; charset=utf-8")
                return
            await self.app(scope, receive, send)
            return
        await self._send(send, 200, asset[0], asset[1], head=scope.get("method") == "HEAD")

    @staticmethod
    async def _send(send: Send, status: int, body: bytes, content_type: str, head: bool = False) -> None:
        headers = [
            (b"content-type", content_type.encode()),
            (b"content-length", str(len(body)).encode()),
            (b"cache-control", b"no-cache"),
            (b"x-content-type-options", b"nosniff"),
        ]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if head else body})
