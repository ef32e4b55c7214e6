"""Long answers in the real browser (issue 29, item 3 and the "long answers" row): the answer streams onto
the page while the model writes it, the final answer replaces the draft, a reload mid-answer repeats
nothing; code blocks are highlighted and copied, the whole answer too; tables are styled; what the model
writes stays sanitised with the CSP off.

The scripted model sends the first words of its answer and holds the rest until the test has seen them
on the page (an event, never a sleep): "before the answer is complete" is a state, not a moment."""

from __future__ import annotations

import json
import threading

import pytest
from playwright.sync_api import expect

from tests.support.browser import (
    SCREENSHOTS,
    Conductor,
    answers,
    ask,
    is_supervisor_post,
    screenshot,
    supervisor_run_id,
    worker_rows,
)
from tests.support.scripts import has_tool_results, role_of

CODE = "df -h /var | awk 'NR>1 {print $5}'\necho \"done\""
ANSWER = ("Disk on **cube** is 78% full.\n\n```bash\n" + CODE + "\n```\n\n"
          "| mount | used |\n|---|---|\n| / | 78% |\n| /var | 41% |\n\n"
          "```python\nimport shutil\nprint(shutil.disk_usage('/'))\n```\n\nThat is all.")
FIRST = "Disk on **cube** "
INJECTED = ("Look: <img src=x onerror=\"window.__pwned=1\"><script>window.__pwned=2</script> "
            "[a link](javascript:window.__pwned=3)\n\n```bash\n<script>window.__pwned=4</script>\n```")


class Streaming:
    """The conductor's run, its supervisor's answer streamed: ``FIRST``, then the rest once ``release`` is set."""

    def __init__(self, conductor: Conductor, answer: str = ANSWER, first: str = FIRST) -> None:
        self.conductor = conductor
        self.answer, self.first = answer, first
        self.release = threading.Event()

    def __call__(self, request):
        if role_of(request) == "supervisor" and has_tool_results(request):
            rest = self.answer[len(self.first):]
            return {"content": self.answer, "chunks": [self.first, *rest.split("\n")[:1],
                                                       *("\n" + line for line in rest.split("\n")[1:])],
                    "until": self.release}
        return self.conductor(request)


@pytest.fixture
def streaming(scripted, conductor):
    playing = Streaming(conductor)
    scripted.respond_with(playing)
    yield playing
    playing.release.set()
    scripted.respond_with(conductor)


def watch_times(page) -> None:
    """Record (page clock) when the last worker row turns success and when answer text first shows."""
    page.evaluate("""() => {
      window.__times = {};
      new MutationObserver(() => {
        const rows = [...document.querySelectorAll('li[data-job-id]')];
        if (!window.__times.workers && rows.length >= 2 && rows.every(r => r.dataset.status === 'success'))
          window.__times.workers = performance.now();
        if (!window.__times.first && document.querySelector('article[data-run-id] .md[data-streaming]'))
          window.__times.first = performance.now();
      }).observe(document.body, {subtree: true, childList: true, attributes: true, characterData: true});
    }""")


def test_the_answer_streams_onto_the_page_before_it_is_complete_and_the_final_one_replaces_it(
        open_page, new_owner, streaming):
    page = open_page(new_owner())
    watch_times(page)
    with page.expect_response(is_supervisor_post) as posted:
        ask(page, "How full is the disk on cube?")
    run_id = supervisor_run_id(posted.value)
    answer = answers(page, run_id)
    draft = answer.locator(".md[data-streaming]")
    expect(draft).to_contain_text("Disk on cube")  # the first words, rendered as markdown (cube is bold)
    expect(draft.locator("strong")).to_have_text("cube")
    assert "That is all." not in answer.inner_text()  # the model holds the rest: the answer is not complete
    expect(answer.get_by_role("button", name="Copy answer")).to_have_count(0)  # not while it streams
    screenshot(page, "answer-streaming")
    times = page.evaluate("window.__times")
    streaming.release.set()

    expect(answer.locator(".md:not([data-streaming])")).to_contain_text("That is all.")
    expect(answer).to_have_count(1)  # the final answer replaced the draft
    assert answer.inner_text().count("Disk on cube") == 1  # no text twice
    expect(worker_rows(page)).to_have_count(2)
    record_first_token(times)
    screenshot(page, "answer-final")

    page.reload()  # the stored thread: the same answer, once
    expect(answers(page, run_id)).to_have_count(1)
    expect(answers(page, run_id)).to_contain_text("That is all.")


def record_first_token(times: dict) -> None:
    """The page's delay from the last worker's success to the first answer words (docs/performance.md)."""
    if not times.get("workers") or not times.get("first"):
        return
    assert times["first"] >= times["workers"]  # the synthesis follows the workers
    SCREENSHOTS.parent.mkdir(parents=True, exist_ok=True)
    with (SCREENSHOTS.parent / "first-answer-token.jsonl").open("a") as out:
        out.write(json.dumps({"last_worker_to_first_token_ms": round(times["first"] - times["workers"], 1)}) + "\n")


def test_a_reload_mid_answer_shows_the_draft_once_and_then_the_answer(open_page, new_owner, streaming):
    page = open_page(new_owner())
    with page.expect_response(is_supervisor_post) as posted:
        ask(page, "How full is the disk on cube?")
    run_id = supervisor_run_id(posted.value)
    expect(answers(page, run_id).locator(".md[data-streaming]")).to_contain_text("Disk on cube")
    page.reload()  # re-attached from the run's first event: its deltas replayed, each applied once
    answer = answers(page, run_id)
    expect(answer.locator(".md[data-streaming]")).to_contain_text("Disk on cube")
    streaming.release.set()
    expect(answer.locator(".md:not([data-streaming])")).to_contain_text("That is all.")
    expect(answer).to_have_count(1)
    assert answer.inner_text().count("Disk on cube") == 1


def test_a_stream_dropped_mid_answer_resumes_after_its_last_event_without_repeating_text(
        chromium, served, new_owner, streaming):
    from tests.support.browser import WAIT_MS, CuttableProxy, sign_in

    proxy = CuttableProxy(served.url)  # the page reaches zerg serve through it
    context = chromium.new_context(base_url=proxy.url)
    context.set_default_timeout(WAIT_MS)
    try:
        page = context.new_page()
        sign_in(page, new_owner())
        with page.expect_response(is_supervisor_post) as posted:
            ask(page, "How full is the disk on cube?")
        answer = answers(page, supervisor_run_id(posted.value))
        expect(answer.locator(".md[data-streaming]")).to_contain_text("Disk on cube")
        connection = page.get_by_role("status", name="Connection")
        proxy.cut()  # the open event stream drops mid-answer
        expect(connection).to_have_text("Reconnecting…")
        streaming.release.set()  # the model writes the rest while the page is away
        proxy.restore()  # EventSource comes back with Last-Event-ID: the events after it, once
        expect(connection).to_have_text("Live")
        expect(answer.locator(".md:not([data-streaming])")).to_contain_text("That is all.")
        expect(answer).to_have_count(1)
        assert answer.inner_text().count("Disk on cube") == 1
    finally:
        context.close()
        proxy.close()


def test_code_blocks_are_highlighted_and_copied_and_so_is_the_whole_answer(chromium, served, new_owner, conductor):
    from tests.support.browser import sign_in

    conductor.answer = ANSWER
    context = chromium.new_context(base_url=served.url, viewport={"width": 1280, "height": 900},
                                   permissions=["clipboard-read", "clipboard-write"])
    try:
        page = context.new_page()
        sign_in(page, new_owner())
        with page.expect_response(is_supervisor_post) as posted:
            ask(page, "How full is the disk on cube?")
        answer = answers(page, supervisor_run_id(posted.value))
        expect(answer.locator("pre code.language-bash span.tok-func").first).to_have_text("df")
        expect(answer.locator("pre code.language-python span.tok-kwd").first).to_have_text("import")
        expect(answer.locator(".code-bar")).to_have_count(2)
        expect(answer.locator("table th").first).to_have_text("mount")
        header = answer.locator("table th").first.evaluate("th => getComputedStyle(th).backgroundColor")
        assert header not in ("rgba(0, 0, 0, 0)", "transparent")  # a styled header row

        answer.get_by_role("button", name="Copy bash code").click()
        expect(answer.get_by_role("button", name="Copy bash code")).to_have_text("Copied")
        assert page.evaluate("navigator.clipboard.readText()") == CODE
        answer.get_by_role("button", name="Copy answer").click()
        expect(answer.get_by_role("button", name="Copied")).to_be_visible()
        assert page.evaluate("navigator.clipboard.readText()") == ANSWER
        screenshot(page, "answer-code-and-table")
        code_bg = "pre => getComputedStyle(pre).backgroundColor"
        light = answer.locator("pre").first.evaluate(code_bg)
        page.emulate_media(color_scheme="dark")
        expect(answer.locator("pre").first).not_to_have_css("background-color", light)  # the dark theme's own
        screenshot(page, "answer-code-and-table-dark")
    finally:
        context.close()


def test_a_streamed_answer_stays_sanitised_with_the_csp_off(chromium, served, new_owner, scripted, conductor):
    from tests.support.browser import sign_in

    playing = Streaming(conductor, answer=INJECTED, first="Look: ")
    scripted.respond_with(playing)
    context = chromium.new_context(base_url=served.url, bypass_csp=True)
    try:
        page = context.new_page()
        sign_in(page, new_owner())
        with page.expect_response(is_supervisor_post) as posted:
            ask(page, "Show me the page")
        answer = answers(page, supervisor_run_id(posted.value))
        expect(answer.locator(".md[data-streaming]")).to_contain_text("Look:")
        playing.release.set()
        code = answer.locator(".md:not([data-streaming]) pre code")
        expect(code).to_contain_text("<script>window.__pwned=4</script>")  # shown as text, never run
        assert page.evaluate("window.__pwned") is None
        assert answer.locator("script, img, [onerror]").count() == 0
        assert answer.locator("a[href^='javascript']").count() == 0
    finally:
        playing.release.set()
        scripted.respond_with(conductor)
        context.close()
