"""The inspector page on long turns, in headless Chromium: virtualized token rows against all boxes at once.

For each turn length (the engine's reply; the prompt adds a few ids) one run serves a real tito server (qwen3, the
instant engine scripted to answer that many ids), commits the turn, and measures side by side:
  api     GET /sessions/{id}/turns/0 from Python (the JSON the page reads: ids, pieces, logprobs, mask)
  page    in the page, from the route change to the first token rows drawn: fetch, JSON parse, layout of every
          box (widths measured, rows packed), and the visible rows put in the DOM (the page's own timer)
  jump    scroll to the last row and draw it (what a scroll costs)
  naive   the same boxes all put in the DOM at once (one element per token) and laid out: what virtualization saves
and the number of token elements the page holds. Target (issue 20): a 32k-token turn renders in under 1 s.

Run from the repository root (Debian `chromium` and `playwright` installed):
  PYTHONPATH=src python benchmarks/inspector.py [--tokens 1000 8000 32000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import time
from collections.abc import Iterator
from typing import Any

import httpx

from tito.engines.instant import InstantEngine
from tito.engines.protocol import GenerateRequest
from tito.family_tokenizer import builtin_tokenizer_for
from tito.server import ServerOptions, ServerState, create_app
from tito.server.commands.running import serve_in_thread

TARGET_MS = 1000.0
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip

NAIVE_RENDER = """() => {
  const started = performance.now();
  const { ids } = window.__inspectorTurn.tokens;
  const html = [];
  const style = 'position:static;display:inline-block';
  for (let i = 0; i < ids.length; i++) html.push(`<span class="tk s" style="${style}">${ids[i]}</span>`);
  const holder = document.createElement('div');
  holder.innerHTML = html.join('');
  document.body.appendChild(holder);
  holder.getBoundingClientRect();  // force layout of every box
  const elapsed = performance.now() - started;
  holder.remove();
  return elapsed;
}"""

JUMP = """() => new Promise((done) => {
  const pane = document.getElementById('tokens');
  const started = performance.now();
  pane.scrollTop = pane.scrollHeight;
  requestAnimationFrame(() => requestAnimationFrame(() => done(performance.now() - started)));
})"""


@contextlib.contextmanager
def server_with_turns(lengths: list[int]) -> Iterator[tuple[str, dict[int, str]]]:
    """A server and one session per length whose one turn samples that many ids."""
    tokenizer = builtin_tokenizer_for("qwen3")[0]
    words = tokenizer.encode(" alpha beta gamma delta, epsilon.\n", add_special_tokens=False)
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    wanted: list[int] = []

    def script(request: GenerateRequest) -> list[int]:
        return [*(words * (wanted[-1] // len(words) + 1))[: wanted[-1] - 1], end]

    state = ServerState(tokenizer, InstantEngine(script), ServerOptions(family="qwen3"))
    sessions: dict[int, str] = {}
    with serve_in_thread(create_app(state)) as url, httpx.Client(base_url=url, timeout=60) as http:
        for length in lengths:
            wanted.append(length)
            session_id = http.post("/sessions").json()["session_id"]
            body = {"model": "m", "messages": [{"role": "user", "content": "write"}], "max_tokens": length + 10}
            assert http.post(f"/sessions/{session_id}/v1/chat/completions", json=body).status_code == 200
            sessions[length] = session_id
        yield url, sessions


def measure(page: Any, url: str, session_id: str) -> dict[str, float]:
    started = time.perf_counter()
    with httpx.Client(timeout=60) as http:
        turn = http.get(f"{url}/sessions/{session_id}/turns/0")
    api_ms = (time.perf_counter() - started) * 1000
    page.goto(f"{url}/ui")
    page.wait_for_selector("#sessions")
    page.evaluate("() => { window.__inspector = null; }")
    page.evaluate(f"() => {{ location.hash = '#/sessions/{session_id}/turns/0'; }}")
    page.wait_for_function("() => window.__inspector && window.__inspector.renderedTurn")
    rendered = page.evaluate("() => window.__inspector.renderedTurn")
    boxes = page.locator("#tokens .tk").count()
    jump_ms = page.evaluate(JUMP)
    page.evaluate(f"() => {{ window.__inspectorTurn = {{ tokens: {{ ids: {turn.json()['tokens']['ids']} }} }}; }}")
    naive_ms = page.evaluate(NAIVE_RENDER)
    return {"tokens": rendered["tokens"], "api": api_ms, "page": rendered["ms"], "jump": jump_ms, "naive": naive_ms,
            "boxes": boxes, "bytes": len(turn.content)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, nargs="+", default=[1000, 8000, 32000])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    chromium = shutil.which("chromium")
    if chromium is None:
        raise SystemExit("no chromium on PATH (Debian: apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    best: dict[int, dict[str, float]] = {}
    with server_with_turns(args.tokens) as (url, sessions), sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        for _ in range(args.rounds):
            for length, session_id in sessions.items():  # lengths interleaved over rounds
                result = measure(page, url, session_id)
                kept = best.setdefault(length, result)
                for key in ("api", "page", "jump", "naive"):
                    kept[key] = min(kept[key], result[key])
        browser.close()
    print(f"{'tokens':>7} {'json KB':>8} {'api ms':>7} {'page ms':>8} {'jump ms':>8} {'naive ms':>9} "
          f"{'naive/page':>10} {'DOM boxes':>9}")  # fmt: skip
    for result in best.values():
        print(f"{result['tokens']:>7} {result['bytes'] / 1024:>8.0f} {result['api']:>7.1f} {result['page']:>8.1f} "
              f"{result['jump']:>8.1f} {result['naive']:>9.1f} {result['naive'] / result['page']:>10.1f} "
              f"{result['boxes']:>9}")  # fmt: skip
    longest = best[max(best)]
    met = longest["page"] < TARGET_MS
    print(f"{longest['tokens']}-token turn rendered in {longest['page']:.0f} ms (target < {TARGET_MS:.0f} ms): "
          f"{'met' if met else 'NOT met'}")  # fmt: skip
    if not met:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
