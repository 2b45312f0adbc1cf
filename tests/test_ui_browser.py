"""The app in a real browser: Debian's chromium driven by Playwright.

The engine is made of fakes that stream word by word with a delay (so the draft and
heavy answers are seen while they stream) over the REAL retriever and store holding
the sample handbook. Skipped when /usr/bin/chromium or Playwright is missing; CI
installs both (``apt-get install -y chromium``; ``playwright`` in requirements-test).
Never ``playwright install``: the browser is the system's.
"""

import os
import re

import pytest

from specrag.settings import Settings as _Settings
from specrag.ui.app import build
from tests.support.env import make_settings
from tests.support.fakes import DRAFT_WRONG, HEAVY_ANSWER, handbook_engine, launch

THRESHOLD = _Settings().verify.threshold  # the calibrated default
ARTIFACTS = os.path.join(os.path.dirname(__file__), "artifacts")  # screenshots, git-ignored

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
EASY = "How many days of paid annual leave do employees get?"
HARD = "I was on call during a week with a public holiday. What am I paid?"
T = 30_000  # ms: generous for a loaded 2-core machine; the happy path takes ~2 s

pytestmark = [
    pytest.mark.browser, pytest.mark.slow,
    pytest.mark.skipif(not os.path.exists(CHROMIUM),
                       reason=f"{CHROMIUM} not found: apt-get install -y chromium"),
]


@pytest.fixture(scope="module")
def app_url(tmp_path_factory, embedder):
    settings = make_settings(tmp_path_factory.mktemp("ui-browser") / "data")
    demo = build(settings, engine=handbook_engine(settings, embedder, 0.06, 0.06))
    assert demo.specrag_sample.wait(120)
    yield launch(demo)
    demo.close()


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser, app_url):
    context = browser.new_context(viewport={"width": 1366, "height": 850})
    pg = context.new_page()
    open_app(pg, app_url)
    yield pg
    context.close()


def open_app(pg, url):
    pg.goto(url, wait_until="load")
    pg.wait_for_selector("#sr-question textarea", timeout=T)
    # plotly's 4.5 MB bundle loads after the page and holds the main thread for a while
    # on a slow machine; streamed updates would show up in one burst behind it
    pg.wait_for_selector("#sr-chart .js-plotly-plot", timeout=T)


def ask(pg, question):
    box = pg.locator("#sr-question textarea")
    box.fill(question)
    box.press("Enter")


def last_turn(pg):
    return pg.locator("#sr-conversation .sr-turn").last


def test_easy_question_draft_streams_then_is_accepted(page):
    from playwright.sync_api import expect

    page.get_by_role("button", name=EASY).click()  # an example question fills the box
    expect(page.locator("#sr-question textarea")).to_have_value(EASY, timeout=T)
    page.locator("#sr-ask").click()
    turn = last_turn(page)
    badge = turn.locator(".sr-draft .sr-badge")
    badge.filter(has_text="draft · verifying").wait_for(timeout=T)  # marked draft while streaming
    page.locator('.sr-turn[data-state="accepted"]').wait_for(timeout=T)
    assert badge.inner_text().lower() == "draft · accepted"
    assert turn.locator(".sr-score").inner_text() == "grounded 1.00"
    assert turn.locator(".sr-threshold").inner_text() == f"{THRESHOLD:.2f}"
    assert turn.locator(".sr-heavy").count() == 0
    assert turn.locator(".sr-draft.sr-final").count() == 1
    sentence = turn.locator(".sr-sent.sr-supported summary")
    assert "leave.md" in sentence.get_attribute("title")  # the supporting chunk on hover
    sentence.click()  # ... and on expand
    assert "25 days of paid annual leave" in turn.locator(".sr-support blockquote").inner_text()
    cite = turn.locator(".sr-citations summary").first
    assert "leave.md" in cite.inner_text()
    cite.click()
    assert "Annual leave" in turn.locator(".sr-citations blockquote").first.inner_text()
    assert re.search(r"cost \$0\.0000 \(heavy-only \$\d", turn.locator(".sr-meta").inner_text())
    assert page.locator("#sr-question textarea").input_value() == ""  # cleared for the next
    shot(page, "accepted-draft")


def test_hard_question_heavy_answer_beside_the_draft_becomes_the_answer(page):
    ask(page, HARD)
    turn = last_turn(page)
    page.locator('.sr-turn[data-state="escalating"] .sr-heavy').wait_for(timeout=T)
    draft, heavy = turn.locator(".sr-draft"), turn.locator(".sr-heavy")
    assert "draft · rejected" in draft.locator(".sr-badge").inner_text().lower()
    assert draft.locator(".sr-sent.sr-unsupported").count() == 1
    d, h = draft.bounding_box(), heavy.bounding_box()
    assert h["x"] > d["x"] + d["width"] - 1 and abs(h["y"] - d["y"]) < 5  # side by side
    page.locator('.sr-turn[data-state="replaced"]').wait_for(timeout=T)
    assert heavy.locator(".sr-badge").inner_text().lower() == "heavy · answer"
    assert "sr-final" in heavy.get_attribute("class")
    assert "sr-final" not in draft.get_attribute("class")
    assert heavy.locator(".sr-answer-tag").count() == 1
    assert draft.locator(".sr-answer-tag").count() == 0
    assert heavy.locator(".sr-text").inner_text() == HEAVY_ANSWER
    assert draft.locator(".sr-text").inner_text() == DRAFT_WRONG
    assert turn.locator(".sr-citations li").count() == 2
    assert "heavy tier" in turn.locator(".sr-meta").inner_text()
    shot(page, "heavy-beside-draft")


def shot(pg, name: str) -> None:
    """Save a full-page screenshot to tests/artifacts/ for a person to look at."""
    os.makedirs(ARTIFACTS, exist_ok=True)
    pg.screenshot(path=os.path.join(ARTIFACTS, f"{name}.png"), full_page=True)


def chart_points(pg) -> int:
    return pg.evaluate("() => { const g = document.querySelector('#sr-chart .js-plotly-plot');"
                       " return g && g.data ? g.data[0].x.length : -1; }")


def test_chart_updates_as_answers_complete(page):
    assert "No answers yet" in page.locator("#sr-stats").inner_text()
    page.wait_for_function("() => document.querySelector('#sr-chart .js-plotly-plot')", timeout=T)
    assert chart_points(page) == 0
    ask(page, EASY)
    page.locator("#sr-stats", has_text="1 answer ").wait_for(timeout=T)
    page.wait_for_function("() => document.querySelector('#sr-chart .js-plotly-plot')"
                           ".data[0].x.length === 1", timeout=T)
    ask(page, HARD)
    page.locator("#sr-stats", has_text="2 answers").wait_for(timeout=T)
    page.wait_for_function("() => document.querySelector('#sr-chart .js-plotly-plot')"
                           ".data[0].x.length === 2", timeout=T)
    stats = page.locator("#sr-stats").inner_text()
    assert "drafts accepted 50% (1/2)" in stats and "heavy-only $" in stats
    traces = page.evaluate("() => document.querySelector('#sr-chart .js-plotly-plot').data"
                           ".map(t => [t.name, t.y])")
    named = {name: ys for name, ys in traces}
    assert named["acceptance"] == [1, 0.5] and named["heavy"][0] == 0 and named["heavy"][1] > 0
    shot(page, "chart")


def test_upload_shows_per_file_results_and_delete(page, tmp_path):
    good = tmp_path / "parking.md"
    good.write_text("# Parking\n\nThe garage has 40 spaces; book one by 09:00 the day before.\n")
    bad = tmp_path / "broken.pdf"
    bad.write_bytes(b"%PDF-1.7 this is not really a pdf")
    page.get_by_role("tab", name="Documents").click()
    page.locator("#sr-docs").get_by_text("leave.md").wait_for(timeout=T)  # the sample handbook
    page.locator("#sr-upload input[type=file]").set_input_files([str(good), str(bad)])
    page.locator("#sr-upload").get_by_text("broken").wait_for(timeout=T)  # name and extension
    page.locator("#sr-upload").get_by_text("parking").wait_for(timeout=T)  # are separate nodes
    page.locator("#sr-ingest").click()
    summary = page.locator("#sr-ingest-summary")
    summary.get_by_text("1 stored, 0 already present, 1 failed").wait_for(timeout=T)
    results = page.locator("#sr-results")
    assert "added" in results.inner_text() and "failed" in results.inner_text()
    assert "broken.pdf" in results.inner_text()
    shot(page, "upload-results")
    page.locator("#sr-docs").get_by_text("parking.md").wait_for(timeout=T)
    page.locator("#sr-docs").get_by_text("parking.md").click()  # selecting a row picks it
    page.wait_for_function(
        "() => document.querySelector('#sr-doc-name input').value === 'parking.md'", timeout=T)
    page.locator("#sr-delete").click()
    page.locator("#sr-delete-msg").get_by_text("Deleted parking.md.").wait_for(timeout=T)
    page.locator("#sr-docs").get_by_text("parking.md").wait_for(state="detached", timeout=T)


def test_two_sessions_at_once_see_no_cross_talk(browser, app_url):
    a_ctx, b_ctx = browser.new_context(), browser.new_context()
    try:
        a, b = a_ctx.new_page(), b_ctx.new_page()
        open_app(a, app_url)
        open_app(b, app_url)
        ask(a, EASY)
        ask(b, HARD)
        a.locator('.sr-turn[data-state="accepted"]').wait_for(timeout=T)
        b.locator('.sr-turn[data-state="replaced"]').wait_for(timeout=T)
        a.locator("#sr-stats", has_text="1 answer ").wait_for(timeout=T)
        b.locator("#sr-stats", has_text="1 answer ").wait_for(timeout=T)
        a_text, b_text = (p.locator("#sr-conversation").inner_text() for p in (a, b))
        assert EASY in a_text and HARD not in a_text and HEAVY_ANSWER not in a_text
        assert HARD in b_text and EASY not in b_text and HEAVY_ANSWER in b_text
        assert a.locator(".sr-turn").count() == 1 and b.locator(".sr-turn").count() == 1
        assert "accepted 100%" in a.locator("#sr-stats").inner_text()
        assert "accepted 0%" in b.locator("#sr-stats").inner_text()
    finally:
        a_ctx.close()
        b_ctx.close()


def test_markup_in_a_question_is_shown_not_run(page):
    ask(page, "<img src=x onerror=\"window.__pwned=1\"> annual leave?")
    page.locator(".sr-turn[data-state]").last.wait_for(timeout=T)
    last_turn(page).locator(".sr-meta").wait_for(timeout=T)
    assert page.evaluate("() => window.__pwned === undefined")
    assert "<img src=x" in last_turn(page).locator(".sr-q").inner_text()


def test_settings_panel_changes_only_its_own_session(browser, app_url):
    a_ctx, b_ctx = browser.new_context(), browser.new_context()
    try:
        a, b = a_ctx.new_page(), b_ctx.new_page()
        open_app(a, app_url)
        open_app(b, app_url)
        a.get_by_role("tab", name="Settings").click()
        assert "Claude" in a.locator("#sr-claude").inner_text()
        a.locator("#sr-models").get_by_text("anthropic: claude-sonnet-4-6").wait_for(timeout=T)
        a.locator("#sr-policy").get_by_role("radio", name="heavy-only").check()
        a.get_by_role("tab", name="Chat").click()
        ask(a, EASY)
        ask(b, EASY)
        a.locator('.sr-turn[data-state="heavy"]').wait_for(timeout=T)  # no draft at all
        b.locator('.sr-turn[data-state="accepted"]').wait_for(timeout=T)  # still lazy
        assert a.locator(".sr-draft").count() == 0 and b.locator(".sr-heavy").count() == 0
    finally:
        a_ctx.close()
        b_ctx.close()


# -- the source viewer ----------------------------------------------------------------------
LEAVE_LINE = "Every employee receives 25 days of paid annual leave per calendar year."
ON_CALL = ("# On call\n\nThe rota changes every Monday at 10:00, when the outgoing engineer "
           "hands over every open incident.\n\n"
           "The on-call engineer acknowledges every page within 15 minutes, day or night, "
           "weekends included.\n\n"
           "Missed pages go to the team lead after 30 minutes, and to the head of engineering "
           "after an hour.\n")


def _guide_pdf() -> bytes:
    """Three pages of several lines each; page 2 holds the leave rule."""
    import io

    from reportlab.pdfgen import canvas

    buf = io.BytesIO()
    c = canvas.Canvas(buf)
    pages = [["Facilities guide", "Welcome to the office. This guide covers the building."],
             ["Time off", LEAVE_LINE, "Leave is booked in the HR portal two weeks ahead.",
              "Unused days carry over until the end of March."],
             ["Bicycles", "Bicycles go in the courtyard racks, never in the hallways."]]
    for lines in pages:
        c.setFont("Helvetica-Bold", 18)
        c.drawString(72, 740, lines[0])
        c.setFont("Helvetica", 12)
        for n, line in enumerate(lines[1:]):
            c.drawString(72, 700 - 20 * n, line)
        c.showPage()
    c.save()
    return buf.getvalue()


@pytest.fixture(scope="module")
def viewer_url(tmp_path_factory, embedder):
    """An app whose default collection holds a PDF and a Markdown file, nothing else, cut
    into small chunks (about a line each) so a passage has neighbours to show."""
    settings = make_settings(tmp_path_factory.mktemp("ui-viewer") / "data",
                             **{"store.collection": "facilities", "chunking.chunk_size": 24,
                                "chunking.chunk_overlap": 0})
    demo = build(settings, engine=handbook_engine(settings, embedder, 0.02, 0.02), sample=False)
    report = demo.specrag_sample.ingestor.ingest_bytes(
        [("guide.pdf", _guide_pdf()), ("oncall.md", ON_CALL.encode())], "facilities")
    assert [r.status for r in report.results] == ["added", "added"]
    yield launch(demo)
    demo.close()


def test_view_source_shows_the_pdf_page_and_the_marked_passage(browser, viewer_url):
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": 1366, "height": 850})
    try:
        pg = context.new_page()
        open_app(pg, viewer_url)
        ask(pg, EASY)
        pg.locator('.sr-turn[data-state="accepted"] .sr-citations').wait_for(timeout=T)
        cite = last_turn(pg).locator(".sr-citations li").first
        assert "guide.pdf · p.2" in cite.inner_text()
        cite.locator(".sr-open").click()  # opens the viewer, does not fold the details
        box = pg.locator("#sr-viewer-box")
        img = box.locator("figure.sr-vpage img")
        img.wait_for(timeout=T)
        assert "guide.pdf" in box.locator(".sr-vhead").inner_text()
        assert "p.2" in box.locator(".sr-vhead").inner_text()
        assert "highlighted" in img.get_attribute("alt")
        pg.wait_for_function("() => document.querySelector('#sr-viewer-box img').naturalWidth"
                             " === 827", timeout=T)  # A4 at 100 dpi
        assert cite.locator("details").get_attribute("open") is None
        shot(pg, "viewer-pdf")
        pg.locator("#sr-viewer-close").click()
        expect(box).to_be_hidden(timeout=T)

        ask(pg, "Within how many minutes does the on-call engineer acknowledge a page?")
        pg.locator('.sr-turn[data-state="accepted"]').nth(1).wait_for(timeout=T)
        sentence = last_turn(pg).locator(".sr-sent.sr-supported summary")
        sentence.click()  # the verified sentence's support, then its source
        last_turn(pg).locator(".sr-support .sr-open").click()
        mark = box.locator(".sr-vpassage mark")
        mark.wait_for(timeout=T)
        assert "acknowledges every page within 15 minutes" in mark.inner_text()
        assert "rota" not in mark.inner_text() and "Missed" not in mark.inner_text()
        passage = box.locator(".sr-vpassage").inner_text()
        assert "The rota changes every Monday" in passage  # the neighbours around it
        assert "Missed pages go to the team lead" in passage
        assert box.locator("img").count() == 0
        shot(pg, "viewer-text")
    finally:
        context.close()
