"""The inspector page in a real headless Chromium (Debian's `chromium`, driven by Playwright) against a real server.

Open the list (filter, live update), open a tree session with a retry and a branch, open a turn, check that every
token box is coloured by the loss mask the trainer's sample carries, hover one token and read its id; the key
dialog; a 32k-token turn keeps only visible rows in the DOM. Screenshots go to tests/artifacts/ (gitignored).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import Server, ServerFactory
from tests.server.inspector_scenario import TreeScenario, linear_session, tree_session, user
from tests.server.turns.test_completions import client

if os.environ.get("TITO_REQUIRE_BROWSER"):  # .ci/run: a missing browser fails rather than skips
    import playwright.sync_api as sync_api

    CHROMIUM = shutil.which("chromium")
    assert CHROMIUM is not None, "TITO_REQUIRE_BROWSER is set but there is no chromium on PATH"
else:
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright for Python is not installed")
    CHROMIUM = shutil.which("chromium")
    if CHROMIUM is None:
        pytest.skip("no chromium on PATH (Debian: apt-get install chromium)", allow_module_level=True)

pytestmark = pytest.mark.browser
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"

COLLECT_BOXES = """async () => {
  const pane = document.getElementById('tokens');
  const seen = {};
  for (let top = 0; ; top += pane.clientHeight) {
    pane.scrollTop = top;
    pane.dispatchEvent(new Event('scroll'));
    await new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)));
    for (const box of pane.querySelectorAll('.tk')) {
      seen[box.dataset.i] = {mask: Number(box.dataset.mask), id: Number(box.dataset.id), classes: box.className,
                             background: getComputedStyle(box).backgroundColor};
    }
    if (top + pane.clientHeight >= pane.scrollHeight) break;
  }
  pane.scrollTop = 0;
  return seen;
}"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    yield opened
    context.close()
    assert not errors, f"the page raised: {errors}"


@pytest.fixture(scope="module")
def scenario(server: Server) -> TreeScenario:
    return tree_session(server)


def screenshot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"inspector-{name}.png"))


def samples_by_leaf(server: Server, session_id: str) -> dict[int, dict[str, Any]]:
    response = server.http.post(f"/sessions/{session_id}/samples")
    assert response.status_code == 200, response.text
    return {sample["metadata"]["turns"][-1]["node_id"]: sample for sample in response.json()["samples"]}


def test_the_list_filters_sorts_and_shows_new_sessions_while_open(
    server: Server, scenario: TreeScenario, page: Any
) -> None:
    linear_id = linear_session(server, turns=2)
    page.goto(f"{server.url}/ui")
    page.wait_for_selector(f"tr[data-id='{scenario.session_id}']")
    assert page.locator(f"tr[data-id='{linear_id}']").count() == 1
    page.select_option("#kind-filter", "tree")
    assert page.locator(f"tr[data-id='{linear_id}']").count() == 0
    assert page.locator(f"tr[data-id='{scenario.session_id}']").count() == 1
    page.select_option("#kind-filter", "")
    page.click("th[data-key='turns']")  # most turns first
    first = page.locator("#sessions tbody tr").first.get_attribute("data-id")
    assert first == scenario.session_id
    page.fill("#filter", linear_id[:10])
    assert page.locator("#sessions tbody tr[data-id]").count() == 1
    page.fill("#filter", "")
    newcomer = server.new_session()
    page.wait_for_selector(f"tr[data-id='{newcomer}']", timeout=6000)  # polled, no reload
    screenshot(page, "list")


def test_a_tree_session_shows_the_retry_the_branch_and_the_kept_leaves(
    server: Server, scenario: TreeScenario, page: Any
) -> None:
    page.goto(f"{server.url}/ui")
    page.click(f"tr[data-id='{scenario.session_id}']")
    page.wait_for_selector(".node[data-node='4']")
    fates = {
        int(row.get_attribute("data-node")): row.get_attribute("data-fate") for row in page.query_selector_all(".node")
    }
    assert fates == {0: "kept", 1: "dropped", 2: "kept", 3: "kept", 4: "kept"}
    kept_leaves = sorted(int(row.get_attribute("data-node")) for row in page.query_selector_all(".node:has(.leaf)"))
    assert kept_leaves == sorted(samples_by_leaf(server, scenario.session_id)) == [3, 4]
    assert "1 invalid call" in page.inner_text(".node[data-node='0']")
    assert "↳ #0" in page.inner_text(".node[data-node='4']")  # the branch points at its parent
    screenshot(page, "tree")


def test_a_turns_token_boxes_follow_the_samples_loss_mask_and_hover_shows_the_id(
    server: Server, scenario: TreeScenario, page: Any
) -> None:
    samples = samples_by_leaf(server, scenario.session_id)
    page.goto(f"{server.url}/ui#/sessions/{scenario.session_id}")
    page.click(".node[data-node='4']")
    page.wait_for_selector("#tokens .tk")
    boxes = {int(index): box for index, box in page.evaluate(COLLECT_BOXES).items()}
    sample = samples[4]
    assert sorted(boxes) == list(range(len(sample["tokens"])))
    assert [boxes[i]["mask"] for i in range(len(boxes))] == sample["loss_mask"]
    assert [boxes[i]["id"] for i in range(len(boxes))] == sample["tokens"]
    for index, box in boxes.items():
        kind = "s" if sample["loss_mask"][index] else ("o" if "o" in box["classes"].split() else "p")
        assert kind in box["classes"].split(), (index, box)
    prompt_colour = {box["background"] for box in boxes.values() if "p" in box["classes"].split()}
    assert len(prompt_colour) == 1
    sampled_colours = {box["background"] for box in boxes.values() if "s" in box["classes"].split()}
    assert len(sampled_colours) > 3 and not sampled_colours & prompt_colour  # green, shaded by logprob
    assert any("o" in box["classes"].split() for box in boxes.values())  # node 0 is trained in leaf 3's sample
    junctions = [index for index, box in boxes.items() if "j" in box["classes"].split()]
    assert junctions and all(boxes[i - 1]["id"] == sample["tokens"][i - 1] for i in junctions)
    sampled = sample["loss_mask"].index(1) + 3
    page.hover(f".tk[data-i='{sampled}']")
    tip = page.locator("#token-tip")
    assert tip.is_visible() and tip.get_attribute("data-token-id") == str(sample["tokens"][sampled])
    text = tip.inner_text()
    assert f"id {sample['tokens'][sampled]}" in text and "loss mask 1" in text and "logprob -" in text
    screenshot(page, "turn")


def test_a_turn_lists_its_tool_call_attempts_with_their_parse_status(
    server: Server, scenario: TreeScenario, page: Any
) -> None:
    page.goto(f"{server.url}/ui#/sessions/{scenario.session_id}/turns/{scenario.tool_node}")
    page.wait_for_selector("#attempts")
    statuses = [row.get_attribute("data-status") for row in page.query_selector_all("#attempts tbody tr")]
    assert statuses == ["ok", "invalid_arguments"]
    page.click(".msg.assistant")  # a message scrolls the tokens to its turn
    screenshot(page, "tool-calls")


def test_the_page_asks_for_the_api_key_and_then_reads_with_it(serve: ServerFactory, page: Any) -> None:
    keyed = serve(api_key="s3cret")
    session_id = keyed.http.post("/sessions", headers={"Authorization": "Bearer s3cret"}).json()["session_id"]
    page.goto(f"{keyed.url}/ui")
    page.wait_for_selector("#key-dialog[open]")
    page.fill("#key-input", "s3cret")
    page.press("#key-input", "Enter")
    page.wait_for_selector(f"tr[data-id='{session_id}']")


def test_a_32k_token_turn_keeps_only_the_visible_rows_in_the_dom(server: Server, page: Any) -> None:
    tokenizer = server.state.tokenizers.tokenizer
    words = tokenizer.encode(" alpha beta gamma delta.\n", add_special_tokens=False)
    server.engine.queue([*(words * 8_000)[:32_000], tokenizer.convert_tokens_to_ids("<|im_end|>")])
    session_id = server.new_session()
    sdk = client(server, session_id)
    sdk.chat.completions.create(model="m", messages=[user("write a lot")], max_tokens=40_000)
    page.goto(f"{server.url}/ui#/sessions/{session_id}/turns/0")
    page.wait_for_selector("#tokens .tk")
    total = int(page.inner_text("#token-count"))
    assert total > 32_000
    assert page.locator("#tokens .tk").count() < 3_000  # virtualized: not one node per token
    page.evaluate("() => { const pane = document.getElementById('tokens'); pane.scrollTop = pane.scrollHeight; }")
    page.wait_for_selector(f".tk[data-i='{total - 1}']")
    assert page.locator("#tokens .tk").count() < 3_000
    screenshot(page, "32k-turn-end")
