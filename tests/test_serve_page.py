"""serve.py's page in a real headless browser: Debian's chromium driven by Playwright.

Skipped, with the reason, where Playwright or chromium is missing. To run it:
``apt-get install -y chromium`` (Playwright's own browser download is not needed; the test
uses ``/usr/bin/chromium`` or ``$ATTNMT_CHROMIUM``), then
``python -m pytest tests/test_serve_page.py``.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="serve.py needs attnmt[serve] (fastapi, uvicorn)")
pytest.importorskip("uvicorn", reason="serve.py needs attnmt[serve] (fastapi, uvicorn)")
playwright = pytest.importorskip("playwright.sync_api", reason="pip install playwright")

import uvicorn  # noqa: E402
from helpers.tiny_checkpoint import make_run, shared_run  # noqa: E402

from attnmt.decode.config import DecodeConfig  # noqa: E402
from attnmt.serve.app import create_app  # noqa: E402
from attnmt.serve.backend import load_model  # noqa: E402
from attnmt.serve.settings import ServeSettings  # noqa: E402

CHROMIUM = os.environ.get("ATTNMT_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).is_file(),
    reason=f"no chromium at {CHROMIUM}: apt-get install -y chromium (or set ATTNMT_CHROMIUM)",
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A uvicorn server on a free loopback port in a thread; its base URL."""
    rnn = tmp_path_factory.getbasetemp() / "tiny-rnn-page"
    if not (rnn / "run").is_dir():
        make_run(rnn, "rnn_bahdanau")
    decode = DecodeConfig()
    models = [
        load_model("ckpt", str(shared_run(tmp_path_factory)), "auto", "cpu", decode),
        load_model("ckpt2", str(rnn / "run"), "auto", "cpu", decode),
    ]
    app = create_app(ServeSettings(ckpt="x", port=0), models)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not srv.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert srv.started, "uvicorn did not start"
    yield f"http://127.0.0.1:{port}/"
    srv.should_exit = True
    thread.join(10)
    sock.close()


@pytest.fixture
def page(server: str) -> Iterator[object]:
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        pg = browser.new_page(viewport={"width": 1200, "height": 800})
        errors: list[str] = []
        pg.on("pageerror", lambda err: errors.append(str(err)))
        pg.goto(server)
        pg.wait_for_function("document.getElementById('models').textContent.includes('step')")
        yield pg
        browser.close()
        assert errors == [], errors


def _translate(pg, text: str) -> None:  # type: ignore[no-untyped-def]
    pg.fill("#src", text)
    pg.click("#go")
    pg.wait_for_selector("svg.attn-map")


def test_type_translate_and_see_a_map_of_pieces(page) -> None:  # type: ignore[no-untyped-def]
    pg = page
    assert "transformer" in pg.text_content("#models")
    pg.uncheck("#compare")
    _translate(pg, "a b c")
    translation = pg.text_content(".translation .text")
    assert translation and translation.strip()
    svg = pg.locator("svg.attn-map").first
    rows, cols = int(svg.get_attribute("data-rows")), int(svg.get_attribute("data-cols"))
    assert rows == svg.locator("text.row-label").count() and rows >= 2
    assert cols == svg.locator("text.col-label").count() == 5  # ▁a ▁ b ▁c </s>
    assert svg.locator("rect.cell").count() == rows * cols
    # hovering a target piece lights the source pieces it attends to, by weight
    before = [b.get_attribute("fill-opacity") for b in svg.locator("rect.col-bg").all()]
    assert set(before) == {"0"}
    svg.locator("text.row-label").nth(0).hover()
    after = [float(b.get_attribute("fill-opacity")) for b in svg.locator("rect.col-bg").all()]
    assert abs(sum(after) - 1) < 0.01
    assert "hl" in (svg.locator("text.row-label").nth(0).get_attribute("class") or "")
    # and a source piece the target pieces that attend to it
    svg.locator("text.col-label").nth(2).hover()
    lit = [float(b.get_attribute("fill-opacity")) for b in svg.locator("rect.row-bg").all()]
    assert any(v > 0 for v in lit)
    assert set(b.get_attribute("fill-opacity") for b in svg.locator("rect.col-bg").all()) == {"0"}


def test_heads_kinds_and_a_second_model_side_by_side(page) -> None:  # type: ignore[no-untyped-def]
    pg = page
    _translate(pg, "a b c\nd e")
    assert pg.locator("section.line").count() == 2
    assert pg.locator("section.line").first.locator(".panel").count() == 2  # ckpt, ckpt2
    assert pg.locator("#head option").count() == 3  # mean, head 1, head 2
    first = pg.locator("svg.attn-map").first
    mean = [c.get_attribute("fill") for c in first.locator("rect.cell").all()]
    pg.select_option("#head", "0")
    head = [
        c.get_attribute("fill") for c in pg.locator("svg.attn-map").first.locator("rect.cell").all()
    ]
    assert head != mean
    pg.select_option("#kind", "encoder_self")
    svg = pg.locator("svg.attn-map").first
    assert svg.get_attribute("data-rows") == svg.get_attribute("data-cols") == "5"
    # the RNN has no encoder self-attention: its panel says so
    assert "no encoder self attention" in pg.text_content("section.line .panel:nth-child(2)")


def _gold_cells(ref: dict, links: list[list[int]]) -> set[tuple[int, int]]:
    """The (row, column) cells of word ``links`` on the reference's piece map."""
    return {
        (r, c)
        for i, j in links
        for r, tw in enumerate(ref["target_words"])
        for c, sw in enumerate(ref["source_words"])
        if tw == j and sw == i
    }


def test_a_reference_and_gold_show_aer_and_outline_the_gold_links(page) -> None:  # type: ignore[no-untyped-def]
    pg = page
    pg.uncheck("#compare")
    assert pg.get_attribute("#gold-box", "open") is None  # collapsed until asked for
    pg.click("#gold-box summary")
    pg.fill("#ref", "c b a\ne d")
    pg.fill("#gold", "0-2 1-1 2-0\n0?1 1-0")
    _translate(pg, "a b c\nd e")
    body = {"text": ["a b c", "d e"], "reference": ["c b a", "e d"],
            "gold": ["0-2 1-1 2-0", "0?1 1-0"], "attention": True}  # fmt: skip
    api = pg.request.post(pg.url + "translate", data=body).json()["lines"]
    for n, (card, line) in enumerate(zip(pg.locator("section.line").all(), api)):
        ref = line["reference"]
        s = ref["scores"]
        shown = card.locator(".reference .aer").text_content()
        assert f"AER {s['aer']:.3f} · precision {s['precision']:.3f}" in shown
        assert "selected" in (card.locator(".reference").get_attribute("class") or "")
        svg = card.locator("svg.attn-map")
        assert int(svg.get_attribute("data-rows")) == len(ref["target_pieces"])
        for kind in ("sure", "possible"):
            drawn = {
                (int(x.get_attribute("data-r")), int(x.get_attribute("data-c")))
                for x in svg.locator(f"rect.gold-{kind}").all()
            }
            want = _gold_cells(ref, ref["gold"][kind])
            assert drawn == want and (want or (kind == "possible" and n == 0))
    # a translation's map has no gold; the reference's comes back on a click
    first = pg.locator("section.line").first
    first.locator(".translation .text").first.click()
    assert first.locator("svg.attn-map rect.gold-sure").count() == 0
    first.locator(".reference").click()
    assert first.locator("svg.attn-map rect.gold-sure").count() > 0


def test_the_reference_shows_the_aer_of_every_map_and_a_click_draws_it(page) -> None:  # type: ignore[no-untyped-def]
    """The tiny Transformer (1 layer, 2 heads): a row for its layer with the heads' mean and
    each head, the API's figures, the best marked; a click on a head's cell draws that
    head's map of the reference."""
    pg = page
    pg.uncheck("#compare")
    pg.click("#gold-box summary")
    pg.fill("#ref", "c b a")
    pg.fill("#gold", "0-2 1-1 2-0")
    _translate(pg, "a b c")
    body = {"text": ["a b c"], "reference": ["c b a"], "gold": ["0-2 1-1 2-0"],
            "attention": True}  # fmt: skip
    (line,) = pg.request.post(pg.url + "translate", data=body).json()["lines"]
    table = line["reference"]["aer_table"]
    shown = pg.locator(".reference table.aer-table")
    assert shown.count() == 1
    cells = shown.locator("td[data-layer]")
    assert cells.count() == len(table["rows"]) == 3
    assert [c.text_content() for c in cells.all()] == [f"{r['aer']:.3f}" for r in table["rows"]]
    best = [r["map"] for r in table["rows"]].index(table["best"])
    assert "best" in (cells.nth(best).get_attribute("class") or "")
    assert pg.locator("#layer option[value=all]").count() == 0  # one layer: no mean over layers
    mean = [c.get_attribute("fill") for c in pg.locator("svg.attn-map rect.cell").all()]
    cells.nth(2).click()  # layer 1, head 2
    assert (pg.input_value("#layer"), pg.input_value("#head")) == ("0", "1")
    head = [c.get_attribute("fill") for c in pg.locator("svg.attn-map rect.cell").all()]
    assert head != mean and len(head) == len(mean)
    assert "selected" in (pg.locator(".reference").get_attribute("class") or "")
