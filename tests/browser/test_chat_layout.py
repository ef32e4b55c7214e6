"""The chat's layout in a real headless Chromium, measured from element geometry: an answer with a long
code line, a wide table or a long unbroken word stays inside its bubble (the code and the table scroll
there), every bubble stays inside the conversation, and the user's later messages stay on screen —
at 1280x800 and at a phone's 390x844. Then the composer's limit (the server's, with a counter near it)
and an error shown as an error, never in a notice's grey."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.support.browser import (
    api_client,
    ask,
    complete_run,
    conversation,
    message_box,
    screenshot,
)

SIZES = [pytest.param({"width": 1280, "height": 800}, id="desktop"),
         pytest.param({"width": 390, "height": 844}, id="phone")]

LONG_LINE = "result = compute(" + ", ".join(f"argument_number_{i}" for i in range(60)) + ")"
LONG_CODE = f"Here is the code:\n\n```python\n{LONG_LINE}\nprint(result)\n```\n\nThat is all."
WIDE_TABLE = ("| " + " | ".join(f"column{i}heading" for i in range(24)) + " |\n"
              + "|" + "---|" * 24 + "\n"
              + "| " + " | ".join(f"value{i}wide" for i in range(24)) + " |")
LONG_WORD = "Unbroken: " + "supercalifragilistic" * 40
FOLLOW_UPS = ["First question after them", "Second question after them", "Third question after them"]

# Every bubble against the log, the log against the page, and the wide things against their bubble.
MEASURE = """log => {
  const box = (el) => { const r = el.getBoundingClientRect(); return { left: r.left, right: r.right }; };
  const article = (el) => el.closest('article.msg');
  const inner = (sel) => [...log.querySelectorAll(sel)].map((el) => ({
    ...box(el), scrollWidth: el.scrollWidth, clientWidth: el.clientWidth, bubble: box(article(el)) }));
  return {
    viewport: document.documentElement.clientWidth, pageScrollWidth: document.documentElement.scrollWidth,
    log: { ...box(log), scrollWidth: log.scrollWidth, clientWidth: log.clientWidth },
    messages: [...log.querySelectorAll('article.msg')].map((m) => ({ role: m.dataset.role, ...box(m),
      text: m.textContent.slice(0, 40) })),
    pre: inner('.md pre'), tables: inner('.md table'),
    words: [...log.querySelectorAll('.md p')].filter((p) => p.textContent.startsWith('Unbroken'))
      .map((p) => ({ ...box(p), bubble: box(article(p)) })),
  };
}"""
SLACK = 0.5  # sub-pixel rounding


def seed_thread(pool, owner_id: int) -> None:
    """The owner's thread as it would be stored: three wide answers, then three questions after them."""
    from zerg.runs import threads

    quick = {"mode": "quick"}  # quick answers: no run behind them
    turns = [("user", "Show me the code", {}), ("assistant", LONG_CODE, quick),
             ("user", "And as a table?", {}), ("assistant", WIDE_TABLE, quick),
             ("user", "And the word?", {}), ("assistant", LONG_WORD, quick),
             *[("user", q, {}) for q in FOLLOW_UPS]]
    with pool.connection() as conn:
        thread_id = threads.find_or_create_thread(conn, owner_id)
        threads.append_messages(conn, owner_id, thread_id, None, turns)


def inside(inner: dict, outer: dict) -> bool:
    return inner["left"] >= outer["left"] - SLACK and inner["right"] <= outer["right"] + SLACK


def assert_contained(page, wide: bool = True) -> dict:
    """Every message inside the log, the log inside the page, nothing scrolling sideways but the code
    and the tables, each inside its bubble. Returns the measurement."""
    m = conversation(page).evaluate(MEASURE)
    assert m["pageScrollWidth"] <= m["viewport"], m  # the page itself never scrolls sideways
    assert m["log"]["right"] <= m["viewport"] + SLACK, m
    assert m["log"]["scrollWidth"] <= m["log"]["clientWidth"], m["log"]  # the log never scrolls sideways
    for msg in m["messages"]:
        assert inside(msg, m["log"]), (msg, m["log"])
        if msg["role"] == "user":
            assert msg["right"] <= m["viewport"] + SLACK, msg
    if wide:
        assert m["pre"] and m["tables"] and m["words"], m
        for block in m["pre"] + m["tables"]:
            assert inside(block, block["bubble"]), block
            # It kept its width and scrolls inside the bubble: the code line was not wrapped away.
            assert block["scrollWidth"] > block["clientWidth"], block
        for word in m["words"]:
            assert inside(word, word["bubble"]), word
    return m


@pytest.mark.parametrize("viewport", SIZES)
def test_long_code_a_wide_table_and_a_long_word_stay_inside_the_log_and_later_questions_stay_visible(
        open_page, new_owner, pool, viewport):
    owner = new_owner("layout")
    seed_thread(pool, owner.owner_id)
    page = open_page(owner, viewport=viewport)
    log = conversation(page)
    expect(log.locator("article[data-role='user']", has_text=FOLLOW_UPS[-1])).to_be_visible()
    expect(log.locator(".md pre")).to_have_count(1)
    expect(log.locator(".md table")).to_have_count(1)
    assert_contained(page)
    for question in FOLLOW_UPS:  # each later question, scrolled to, is on screen (not drawn off to the right)
        bubble = log.locator("article[data-role='user']", has_text=question)
        bubble.scroll_into_view_if_needed()
        expect(bubble).to_be_in_viewport(ratio=1)
    screenshot(page, f"chat-layout-wide-{viewport['width']}x{viewport['height']}")

    # The code block scrolls on its own: the end of the long line is reachable inside the bubble.
    pre = log.locator(".md pre")
    scrolled = pre.evaluate("el => { el.scrollLeft = el.scrollWidth; return el.scrollLeft; }")
    assert scrolled > 0

    page.reload()  # the stored thread again, as after any reload
    expect(log.locator("article[data-role='user']", has_text=FOLLOW_UPS[-1])).to_be_in_viewport(ratio=1)
    assert_contained(page)


def test_a_live_answer_with_a_long_code_line_leaves_the_next_question_on_screen(open_page, new_owner, conductor):
    conductor.answer = LONG_CODE
    page = open_page(new_owner("layout"), viewport={"width": 1280, "height": 800})
    complete_run(page, "Write me the long code please")
    next_question = "Is the next question still on screen?"
    ask(page, next_question)
    bubble = conversation(page).locator("article[data-role='user']", has_text=next_question)
    expect(bubble).to_be_in_viewport(ratio=1)
    m = assert_contained(page, wide=False)
    assert len(m["pre"]) == 1 and m["pre"][0]["scrollWidth"] > m["pre"][0]["clientWidth"], m["pre"]
    assert inside(m["pre"][0], m["pre"][0]["bubble"]), m["pre"]
    screenshot(page, "chat-layout-live-code")


def test_the_composer_takes_as_many_characters_as_the_server_and_counts_near_the_limit(open_page, new_owner,
                                                                                        served):
    from zerg.api.routes.jarvis import UTTERANCE_CHARS

    owner = new_owner("limit")
    page = open_page(owner)
    box = message_box(page)
    expect(box).to_have_attribute("maxlength", str(UTTERANCE_CHARS))
    counter = page.locator("#message-counter")
    box.fill("x" * 100)
    expect(counter).to_have_text("")  # far from the limit: no counter
    box.fill("x" * (UTTERANCE_CHARS - 10))
    expect(counter).to_contain_text(f"{UTTERANCE_CHARS - 10:,} / {UTTERANCE_CHARS:,} characters")
    box.press("End")
    page.keyboard.type("y" * 30)  # typing stops at the limit
    assert len(box.input_value()) == UTTERANCE_CHARS
    expect(counter).to_contain_text(f"{UTTERANCE_CHARS:,} / {UTTERANCE_CHARS:,}")
    expect(counter).to_have_class("counter at-limit")

    # And the server takes exactly that many, and refuses one more.
    client = api_client(served.url, owner)
    assert client.post("/api/jarvis/route", json={"utterance": "x" * UTTERANCE_CHARS}).status_code == 200
    refused = client.post("/api/jarvis/route", json={"utterance": "x" * (UTTERANCE_CHARS + 1)})
    assert refused.status_code in (400, 422), refused.text


def test_an_error_in_the_conversation_is_styled_as_an_error_not_as_a_grey_notice(open_page, new_owner):
    page = open_page(new_owner("error"))
    expect(page.get_by_label("Example tasks")).to_be_visible()  # the thread has loaded (no second error from it)
    page.context.set_offline(True)  # the request fails for real: the page has no network
    words = "Check the disk while the network is down"
    ask(page, words)
    error = conversation(page).locator(".notice.error[role='alert']")
    expect(error).to_have_count(1)
    expect(message_box(page)).to_have_value(words)  # nothing lost: the words come back to the input
    colours = error.evaluate("""el => {
      const probe = (cls) => { const p = document.createElement('p'); p.className = cls;
        el.parentElement.appendChild(p); const c = getComputedStyle(p).color; p.remove(); return c; };
      return { error: getComputedStyle(el).color, bad: probe('error'), notice: probe('notice'),
               style: getComputedStyle(el).fontStyle };
    }""")
    assert colours["error"] == colours["bad"], colours
    assert colours["error"] != colours["notice"], colours
    assert colours["style"] == "normal", colours
    page.context.set_offline(False)
    screenshot(page, "chat-error-styled")


def test_a_long_thread_loads_its_earlier_pages_in_order_and_the_browser_skips_the_pages_off_screen(
        open_page, new_owner, pool):
    """100 stored messages: the latest 30 first, then "Load older messages" three times, each page in
    its place; every message stays in the document (find in page, screen readers), but a page far off
    screen is not rendered (content-visibility), which is what keeps a 2,000-message thread scrolling."""
    from zerg.runs import threads

    owner = new_owner("long thread")
    turns = [t for i in range(50) for t in (("user", f"Question {i:02d}", {}),
                                            ("assistant", f"Answer {i:02d}", {"mode": "quick"}))]
    with pool.connection() as conn:
        threads.append_messages(conn, owner.owner_id, threads.find_or_create_thread(conn, owner.owner_id), None,
                                turns)
    page = open_page(owner, viewport={"width": 1280, "height": 800})
    log = conversation(page)
    messages = log.locator("article[data-role]")
    expect(messages).to_have_count(30)
    expect(messages.last).to_be_in_viewport()
    earlier = log.get_by_role("button", name="Load older messages")
    for shown in (60, 90, 100):
        earlier.click()
        expect(messages).to_have_count(shown)
    expect(earlier).to_have_count(0)  # the thread's first page: nothing older
    texts = messages.evaluate_all("els => els.map((el) => el.querySelector('.plain, .md').textContent.trim())")
    assert texts == [content for _, content, _ in turns], texts

    # At the end of the thread, the first page is far off screen: in the document, not rendered.
    page.evaluate("window.scrollTo(0, document.documentElement.scrollHeight)")
    expect(messages.last).to_be_in_viewport()
    first, last = (messages.nth(i).evaluate("el => el.checkVisibility({contentVisibilityAuto: true})") for i in (0, -1))
    assert (first, last) == (False, True)
    page.evaluate("window.scrollTo(0, 0)")  # and back at the top it is drawn again
    expect(messages.first).to_be_in_viewport()
    page.wait_for_function("() => document.querySelector('[role=log] article[data-role]')"
                           ".checkVisibility({contentVisibilityAuto: true})")
