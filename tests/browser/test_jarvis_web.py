"""The Jarvis web client in a real headless Chromium against ``zerg serve`` and the scripted model:
sign in, ask, live worker rows, the answer; reload and a dropped stream mid-run lose and repeat
nothing; cancel; routing (quick answers, escalation); keyboard-only use; speech and push detection.

Waits are on page state (Playwright's expectations); the scripted workers are held at a gate
(``conductor.hold()``) so "mid-run" is a state, not a moment."""

from __future__ import annotations

import re
import time


from playwright.sync_api import expect

from tests.support.browser import (
    WAIT_MS,
    answers,
    ask,
    open_settings,
    conversation,
    is_supervisor_post,
    message_box,
    owner_runs,
    screenshot,
    sign_in,
    supervisor_run_id,
    turn,
    worker_rows,
    workers_region,
)
from tests.support.waiting import wait_for

INVESTIGATION = "Investigate disk usage and memory on my servers"
ESCALATION = "I'll escalate this to the supervisor"


def start_held_run(page, conductor, task: str = INVESTIGATION) -> int:
    """Ask ``task`` with the workers held at the gate; returns once both rows show ``running``."""
    conductor.hold()
    with page.expect_response(is_supervisor_post) as posted:
        ask(page, task)
    run_id = supervisor_run_id(posted.value)
    rows = worker_rows(page)
    expect(rows).to_have_count(2)
    for i in range(2):
        expect(rows.nth(i)).to_have_attribute("data-status", "running")
    return run_id


def test_sign_in_ask_two_worker_rows_progress_live_then_the_answer_with_evidence_links(
        open_page, new_owner, conductor):
    page = open_page(new_owner())
    screenshot(page, "client-signed-in")
    run_id = start_held_run(page, conductor)
    expect(page.get_by_text(ESCALATION)).to_have_count(0)  # no jargon: the turn says what happens
    expect(conversation(page).locator("article[data-role='user']", has_text=INVESTIGATION)).to_be_visible()
    region = turn(page, run_id).get_by_role("status", name="Workers")  # the progress is inside the run's turn
    expect(region).to_contain_text(re.compile(r"Working · 2 workers · \d+:\d\d"))
    expect(region).to_contain_text(re.compile(r"Checking (disk usage|memory)…"))  # from the workers' tasks
    expect(region.locator(".spinner")).not_to_have_count(0)
    rows = worker_rows(page)
    expect(rows.filter(has_text="Check disk usage")).to_have_count(1)
    expect(rows.filter(has_text="Check memory")).to_have_count(1)
    expect(answers(page, run_id)).to_have_count(0)  # the workers are still running
    screenshot(page, "client-investigating")

    conductor.release()
    for task in conductor.tasks:
        row = rows.filter(has_text=task)
        expect(row).to_have_attribute("data-status", "success")
        expect(row).to_contain_text(f"summary of {task}")  # the summary, when ready
    answer = answers(page, run_id)
    expect(answer).to_have_count(1)
    expect(answer.locator("strong")).to_have_text("78%")  # markdown, rendered
    links = answer.locator("a[href^='#/dashboard/workers/']")
    expect(links).to_have_count(2)  # one evidence pointer per worker job
    job_ids = sorted(rows.evaluate_all("rows => rows.map(r => r.dataset.jobId)"))
    hrefs = sorted(links.evaluate_all("links => links.map(a => a.getAttribute('href'))"))
    assert hrefs == [f"#/dashboard/workers/{j}" for j in job_ids]
    expect(page.get_by_role("button", name="Cancel")).to_have_count(0)  # no run active any more
    expect(region).to_contain_text(re.compile(r"Used 2 workers · \d+\.\d s"))  # folded above the answer
    screenshot(page, "client-answer")


def test_a_reload_mid_run_keeps_the_rows_and_the_answer_arrives_once(open_page, new_owner, conductor):
    page = open_page(new_owner())
    run_id = start_held_run(page, conductor)
    page.reload()
    rows = worker_rows(page)
    expect(rows).to_have_count(2)  # recovered from the server, not from the page's memory
    conductor.release()
    for task in conductor.tasks:
        expect(rows.filter(has_text=task)).to_have_attribute("data-status", "success")
    expect(answers(page, run_id)).to_have_count(1)
    expect(rows).to_have_count(2)  # nothing repeated by the replay
    question = conversation(page).locator("article[data-role='user']", has_text=INVESTIGATION)
    assert question.count() <= 1
    screenshot(page, "client-after-reload")
    page.reload()  # the thread as stored: the question and its answer, each once
    expect(answers(page, run_id)).to_have_count(1)
    expect(question).to_have_count(1)


def last_event(pool, run_id: int) -> str:
    with pool.connection() as conn:
        return conn.execute("SELECT event_type FROM run_events WHERE run_id = %s ORDER BY id DESC LIMIT 1",
                            (run_id,)).fetchone()["event_type"]


def test_cancel_from_the_page_stops_the_run_and_no_answer_follows(open_page, new_owner, conductor, pool):
    owner = new_owner()
    page = open_page(owner)
    run_id = start_held_run(page, conductor)
    page.get_by_role("button", name="Cancel").click()
    wait_for(lambda: next(r for r in owner_runs(pool, owner.owner_id) if r["id"] == run_id)["status"] == "cancelled",
             "the run cancelled", 60)
    conductor.release()  # the held workers' model calls return: nothing they say reaches the page
    wait_for(lambda: last_event(pool, run_id) == "error", "the run's terminal error event", 60)
    expect(page.get_by_role("button", name="Cancel")).to_have_count(0)  # the page saw the run end
    expect(worker_rows(page)).to_have_count(2)
    for row in worker_rows(page).all():  # no row is left "running": each ends as its job did
        expect(row).to_have_attribute("data-status", re.compile(r"^(success|failed|timeout|cancelled)$"))
    expect(answers(page, run_id)).to_have_count(0)
    screenshot(page, "client-cancelled")


def test_a_dropped_event_stream_shows_reconnecting_then_continues_without_loss(
        chromium, served, new_owner, conductor):
    from tests.support.browser import WAIT_MS, CuttableProxy, sign_in

    proxy = CuttableProxy(served.url)  # the page reaches zerg serve through it
    context = chromium.new_context(base_url=proxy.url)
    context.set_default_timeout(WAIT_MS)
    try:
        page = context.new_page()
        sign_in(page, new_owner())
        run_id = start_held_run(page, conductor)
        connection = page.get_by_role("status", name="Connection")
        expect(connection).to_have_text("Live")
        proxy.cut()  # the open event stream drops; reconnects are refused while the network is down
        expect(connection).to_have_text("Reconnecting…")
        screenshot(page, "client-reconnecting")
        conductor.release()  # the run finishes while the page is away
        proxy.restore()
        expect(connection).to_have_text("Live")
        rows = worker_rows(page)
        for task in conductor.tasks:
            expect(rows.filter(has_text=task)).to_have_attribute("data-status", "success")
        expect(answers(page, run_id)).to_have_count(1)
        expect(rows).to_have_count(2)  # the events missed were replayed once, nothing twice
        expect(conversation(page).locator("article[data-role='assistant']")).to_have_count(1)
    finally:
        context.close()
        proxy.close()


def test_a_run_stopped_at_its_budget_shows_its_partial_answer_and_asks_no_quick_model(
        open_page, new_owner, conductor, pool):
    from zerg.notify.policy import PolicyChange, set_policy

    owner = new_owner()
    with pool.connection() as conn:  # the plan call spends it: the workers and the supervisor are refused
        set_policy(conn, owner.owner_id, PolicyChange(run_token_budget=1))
    page = open_page(owner)
    quick_posts: list[str] = []
    page.on("request", lambda r: quick_posts.append(r.url) if r.url.split("?")[0].endswith("/api/jarvis/quick") else None)
    with page.expect_response(is_supervisor_post) as posted:
        ask(page, INVESTIGATION)
    run_id = supervisor_run_id(posted.value)
    answer = answers(page, run_id)
    expect(answer).to_have_count(1)
    expect(answer).to_contain_text("Run budget of 1 tokens (the owner's default) reached")
    expect(answer).to_contain_text("Not finished:")
    assert quick_posts == []  # no quick answer stands in: that would spend past the budget


def test_a_quick_question_is_answered_in_quick_mode_without_a_run(open_page, new_owner, pool):
    owner = new_owner()
    page = open_page(owner)
    ask(page, "What time is it?")
    quick = conversation(page).locator("article[data-role='assistant'][data-mode='quick']")
    expect(quick).to_have_count(1)
    expect(quick).not_to_have_text("")
    expect(page.get_by_text(ESCALATION)).to_have_count(0)
    assert owner_runs(pool, owner.owner_id) == []
    screenshot(page, "client-quick-answer")


def test_a_quick_answer_that_comes_back_before_the_thread_has_loaded_stays_shown_once(
        open_page, new_owner, pool):
    """The server answers concurrently: the thread page read at sign-in may arrive after a quick
    answer was shown. It must neither take the answer away nor show the question twice."""
    from zerg.runs.threads import append_messages, find_or_create_thread

    owner = new_owner()
    with pool.connection() as conn:
        thread_id = find_or_create_thread(conn, owner.owner_id)
        append_messages(conn, owner.owner_id, thread_id, None,
                        [("user", "Yesterday's question", {}), ("assistant", "Yesterday's answer", {})])
    page = open_page()
    taken, held = [], []

    def hold_the_page(route):  # the chat's page of the thread; the sign-in check (limit=1) goes on
        if "limit=1&" in route.request.url + "&" or taken:
            route.continue_()
        else:
            taken.append(route)
            held.append((route, route.fetch()))  # the server reads the thread now, before the question

    page.route("**/api/jarvis/thread*", hold_the_page)
    sign_in(page, owner)
    # Playwright runs the handler while the page is driven: drive it until the page is read and held.
    deadline = time.monotonic() + WAIT_MS / 1000
    while not held:
        assert time.monotonic() < deadline, "the chat never asked for its page of the thread"
        page.evaluate("0")
    with page.expect_response(lambda r: r.url.split("?")[0].endswith("/api/jarvis/quick")) as quick_post:
        ask(page, "What time is it?")
    assert quick_post.value.ok
    log = conversation(page)
    expect(log.locator("article[data-role='assistant'][data-mode='quick']")).to_have_count(1)
    for route, response in held:  # the snapshot read before the quick turn was stored, delivered late
        route.fulfill(response=response)
    expect(log.get_by_text("Yesterday's answer")).to_be_visible()  # the late page is in
    expect_one_quick_turn_after_yesterday(log)
    page.reload()
    expect_one_quick_turn_after_yesterday(log)


def expect_one_quick_turn_after_yesterday(log) -> None:
    expect(log.locator("article")).to_have_count(4)
    expect(log.locator("article[data-role='assistant'][data-mode='quick']")).to_have_count(1)
    expect(log.locator("article[data-role='user']").last).to_have_text("What time is it?")
    expect(log.locator("article").last).to_have_attribute("data-mode", "quick")


def test_keyboard_only_labelled_input_enter_sends_sensible_tab_order_and_live_progress(
        open_page, new_owner, conductor):
    page = open_page(new_owner())
    box = message_box(page)
    # Tab from the top of the page reaches the message box, and the next stop is Send.
    page.evaluate("document.activeElement && document.activeElement.blur()")
    for _ in range(40):
        page.keyboard.press("Tab")
        if box.evaluate("el => el === document.activeElement"):
            break
    else:
        raise AssertionError("Tab never reached the input labelled 'Message Jarvis'")
    # Shift+Enter is a new line, Enter sends; with text in the box, Send is the next Tab stop and back.
    page.keyboard.type("first line")
    page.keyboard.press("Tab")
    expect(page.get_by_role("button", name="Send")).to_be_focused()
    page.keyboard.press("Shift+Tab")
    expect(box).to_be_focused()
    page.keyboard.press("End")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("second line")
    expect(box).to_have_value("first line\nsecond line")
    page.keyboard.press("Control+A")
    page.keyboard.type(INVESTIGATION)
    conductor.hold()
    with page.expect_response(is_supervisor_post) as posted:
        page.keyboard.press("Enter")
    run_id = supervisor_run_id(posted.value)
    expect(box).to_have_value("")
    # Worker progress is announced: what happens is a polite live line; the block's clocks, which tick
    # every second, are not read out.
    region = workers_region(page)
    expect(region).to_have_attribute("aria-live", "off")
    expect(region.locator(".doing")).to_have_attribute("aria-live", "polite")
    expect(region.locator(".doing")).not_to_be_empty()
    expect(region.locator("li[data-job-id]")).to_have_count(2)
    conductor.release()
    expect(region.locator("li[data-status='success']")).to_have_count(2)
    expect(answers(page, run_id)).to_have_count(1)


PRESENT = """() => ({
    speech: !!(window.SpeechRecognition || window.webkitSpeechRecognition),
    synthesis: 'speechSynthesis' in window,
    push: 'PushManager' in window && 'serviceWorker' in navigator,
})"""

REMOVE_FEATURES = """
for (const name of ['SpeechRecognition', 'webkitSpeechRecognition', 'PushManager', 'speechSynthesis']) {
  try { delete window[name]; } catch (e) {}
  try { Object.defineProperty(window, name, {value: undefined, configurable: true}); delete window[name]; } catch (e) {}
}
"""


def test_speech_and_push_are_offered_where_the_browser_has_them(open_page, new_owner):
    page = open_page(new_owner())
    has = page.evaluate(PRESENT)
    open_settings(page)  # voice, read aloud and push live in the one settings menu
    speak = page.get_by_role("button", name="Speak")
    if has["speech"]:
        expect(speak).to_be_visible()
    else:
        expect(page.get_by_text("Voice input is not supported in this browser")).to_be_visible()
    aloud = page.get_by_role("checkbox", name="Read answers aloud")
    expect(aloud).to_have_count(1 if has["synthesis"] else 0)
    push = page.get_by_role("button", name="Enable push notifications")
    if has["push"]:
        expect(push).to_be_visible()
    else:
        expect(page.get_by_text("Push notifications are not supported in this browser")).to_be_visible()
    screenshot(page, "client-features-present")


def test_without_speech_and_push_apis_the_page_says_so_instead(chromium, served, new_owner):
    from tests.support.browser import WAIT_MS, sign_in

    context = chromium.new_context(base_url=served.url)
    context.set_default_timeout(WAIT_MS)
    context.add_init_script(REMOVE_FEATURES)
    try:
        page = context.new_page()
        sign_in(page, new_owner())
        assert page.evaluate(PRESENT) == {"speech": False, "synthesis": False, "push": False}
        open_settings(page)
        expect(page.get_by_text("Voice input is not supported in this browser")).to_be_visible()
        expect(page.get_by_text("Push notifications are not supported in this browser")).to_be_visible()
        expect(page.get_by_role("button", name="Speak")).to_have_count(0)
        expect(page.get_by_role("checkbox", name="Read answers aloud")).to_have_count(0)
        expect(page.get_by_role("button", name="Enable push notifications")).to_have_count(0)
        screenshot(page, "client-features-absent")
    finally:
        context.close()
