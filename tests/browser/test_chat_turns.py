"""The chat's turns in a real headless Chromium against ``zerg serve`` and the scripted model (issue 29
items 1, 2, 6 and the chat's keyboard): a run's progress lives inside its own turn and stays there
after the next question and after a reload; the question of a running run survives a reload; every
error state reads as a sentence with a next step (Retry / Run again, which work); a phone-size run
keeps the composer on screen; "/" and Escape; the settings menu closes on Escape and an outside click;
the empty state; a long answer keeps its start in view.

Waits are on page state (Playwright's expectations, ``wait_for`` on rows); the scripted workers are
held at a gate (``conductor.hold()``) so "mid-run" is a state, not a moment. A screenshot per state."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from tests.support.browser import (
    Conductor,
    answers,
    ask,
    complete_run,
    conversation,
    is_supervisor_post,
    message_box,
    open_settings,
    owner_runs,
    screenshot,
    supervisor_run_id,
    turn,
)
from tests.support.scripts import role_of, worker_task
from tests.support.waiting import wait_for

TASK = "Investigate disk usage and memory on my servers"
PHONE = {"width": 390, "height": 844}


class TurnConductor(Conductor):
    """The browser tests' scripted run, plus failures on demand: a worker whose task contains one of
    ``failing_tasks`` gets a model error; ``supervisor_down`` makes the supervisor's model fail."""

    def __init__(self) -> None:
        super().__init__()
        self.failing_tasks: set[str] = set()
        self.supervisor_down = False

    def __call__(self, request):
        role = role_of(request)
        if role == "worker" and any(t in worker_task(request) for t in self.failing_tasks):
            return {"status": 400, "message": "the model refused this worker's request (scripted)"}
        if role == "supervisor" and self.supervisor_down:
            return {"status": 400, "message": "the supervisor's model is down (scripted)"}
        return super().__call__(request)


@pytest.fixture(scope="module")
def conductor():
    return TurnConductor()


@pytest.fixture(autouse=True)
def _no_failures(conductor):
    conductor.failing_tasks, conductor.supervisor_down = set(), False
    yield
    conductor.failing_tasks, conductor.supervisor_down = set(), False


def steps(page, run_id: int):
    return turn(page, run_id).get_by_role("status", name="Workers")


def rows_of(page, run_id: int):
    return steps(page, run_id).locator("li[data-job-id]")


def start_held(page, conductor, task: str = TASK) -> int:
    """Ask ``task`` with the workers held; returns once both rows run. The question shows once, even when
    the page's start-up check for a running run finds it while the page's own POST is in flight."""
    conductor.hold()
    questions = conversation(page).locator("article[data-role='user']").filter(has_text=re.compile(f"^{re.escape(task)}$"))
    before = questions.count()
    with page.expect_response(is_supervisor_post) as posted:
        ask(page, task)
    run_id = supervisor_run_id(posted.value)
    expect(rows_of(page, run_id)).to_have_count(2)
    for i in range(2):
        expect(rows_of(page, run_id).nth(i)).to_have_attribute("data-status", "running")
    expect(questions).to_have_count(before + 1)
    return run_id


# --- progress inside the turn -------------------------------------------------------------------

def test_progress_rows_live_inside_the_turn_and_stay_with_it_after_the_next_question_and_a_reload(
        open_page, new_owner, conductor):
    page = open_page(new_owner("turns"))
    first = start_held(page, conductor)
    block = steps(page, first)
    expect(block).to_contain_text(re.compile(r"Working · 2 workers · \d+:\d\d"))
    expect(block).to_contain_text(re.compile(r"Checking (disk usage|memory)…"))  # the workers' tasks, in words
    expect(block.locator("li .spinner")).to_have_count(2)  # a spinner per running worker
    expect(block.locator("li .dur").first).to_have_text(re.compile(r"^\d+:\d\d$"))  # its elapsed time
    for text in ("Analyzing your request", "escalate", "Investigating"):
        expect(conversation(page).get_by_text(text)).to_have_count(0)  # never internals
    # The question is on screen at once, above its turn.
    order = conversation(page).locator("article").evaluate_all("els => els.map(e => e.dataset.role)")
    assert order[-2:] == ["user", "assistant"], order
    screenshot(page, "chat-turns-working")

    conductor.release()
    expect(answers(page, first)).to_have_count(1)
    expect(block).to_contain_text(re.compile(r"Used 2 workers · \d+\.\d s"))  # folded above the answer
    expect(block.locator("details")).not_to_have_attribute("open", "")
    top = "el => el.getBoundingClientRect().top"
    assert block.evaluate(top) < answers(page, first).evaluate(top), "the steps sit above the answer"

    second = complete_run(page, "Check the load on my servers")
    expect(rows_of(page, second)).to_have_count(2)
    expect(rows_of(page, first)).to_have_count(2)  # the old answer kept its steps
    expect(steps(page, first)).to_contain_text("Used 2 workers")
    steps(page, first).locator("summary").click()  # unfold: the rows with their summaries
    for task in conductor.tasks:
        row = rows_of(page, first).filter(has_text=task)
        expect(row).to_be_visible()
        expect(row).to_have_attribute("data-status", "success")
        expect(row).to_contain_text(f"summary of {task}")
    screenshot(page, "chat-turns-kept-after-next-question")

    page.reload()  # past turns load their steps from the run documents
    for run_id in (first, second):
        expect(rows_of(page, run_id)).to_have_count(2)
        expect(steps(page, run_id)).to_contain_text(re.compile(r"Used 2 workers · \d+\.\d s"))
        expect(answers(page, run_id)).to_have_count(1)
    screenshot(page, "chat-turns-after-reload")


def test_the_question_of_a_running_run_survives_a_reload_and_shows_once(open_page, new_owner, conductor):
    page = open_page(new_owner("reload"))
    run_id = start_held(page, conductor)
    page.reload()
    question = conversation(page).locator("article[data-role='user']", has_text=TASK)
    expect(question).to_have_count(1)  # from the run: the thread stores it with the answer
    expect(rows_of(page, run_id)).to_have_count(2)
    expect(steps(page, run_id)).to_contain_text("Working · 2 workers")
    screenshot(page, "chat-turns-reload-mid-run")
    conductor.release()
    expect(answers(page, run_id)).to_have_count(1)
    expect(question).to_have_count(1)
    page.reload()
    expect(answers(page, run_id)).to_have_count(1)
    expect(question).to_have_count(1)


def test_a_follow_up_while_a_run_goes_is_its_own_turn_and_both_turns_finish(open_page, new_owner, conductor):
    page = open_page(new_owner("followup"))
    first = start_held(page, conductor)
    with page.expect_response(is_supervisor_post) as posted:
        ask(page, "Also check the load on them")  # a follow-up on a running task: the supervisor, a new run
    second = supervisor_run_id(posted.value)
    expect(rows_of(page, second)).to_have_count(2)
    expect(rows_of(page, first)).to_have_count(2)
    conductor.release()
    for run_id in (first, second):  # the first run's turn is still followed: it ends too, never stuck "Working"
        expect(answers(page, run_id)).to_have_count(1)
        expect(steps(page, run_id)).to_contain_text("Used 2 workers")
    expect(page.get_by_role("button", name="Cancel")).to_have_count(0)
    screenshot(page, "chat-turns-follow-up")


def test_a_failed_worker_says_why_in_its_row(open_page, new_owner, conductor):
    conductor.failing_tasks = {"Check memory"}
    page = open_page(new_owner("wfail"))
    with page.expect_response(is_supervisor_post) as posted:
        ask(page, TASK)
    run_id = supervisor_run_id(posted.value)
    expect(turn(page, run_id)).not_to_have_attribute("data-status", "running")
    steps(page, run_id).locator("summary").click()
    row = rows_of(page, run_id).filter(has_text="Check memory")
    expect(row).to_have_attribute("data-status", "failed")
    expect(row.locator(".werr")).to_contain_text("Why:")
    expect(row.locator(".werr")).to_contain_text("scripted")  # the reason, from the job's error
    screenshot(page, "chat-turns-worker-failed")


def test_a_long_answer_keeps_its_start_in_view(open_page, new_owner, conductor):
    conductor.answer = "Start of the long answer.\n\n" + "\n\n".join(f"Paragraph {i}: " + "words " * 40 for i in range(300))
    page = open_page(new_owner("long"))
    run_id = complete_run(page, TASK)
    start = answers(page, run_id).get_by_text("Start of the long answer.")
    height = answers(page, run_id).evaluate("el => el.getBoundingClientRect().height")
    assert height > 5000, height  # long indeed
    expect(start).to_be_in_viewport()  # not scrolled away to its end
    screenshot(page, "chat-turns-long-answer")


def test_a_quick_hand_off_starts_a_run_and_no_hand_off_text_is_shown_or_stored(open_page, new_owner, conductor, pool):
    conductor.plain = "HAND-OFF"  # the quick model's word for "this needs tools"
    owner = new_owner("handoff")
    page = open_page(owner)
    def is_quick_post(r):
        return r.url.split("?")[0].endswith("/api/jarvis/quick")

    with page.expect_response(is_quick_post) as quick_post, page.expect_response(is_supervisor_post) as posted:
        ask(page, "What is a kernel?")  # a short definition question: the rules route it to quick
    assert quick_post.value.status == 409 and quick_post.value.json()["error"] == "needs_supervisor"
    run_id = supervisor_run_id(posted.value)
    expect(answers(page, run_id)).to_have_count(1)
    expect(conversation(page).get_by_text("HAND-OFF")).to_have_count(0)
    expect(conversation(page).locator("article[data-role='user']")).to_have_count(1)
    with pool.connection() as conn:
        stored = [r["content"] for r in conn.execute(
            "SELECT content FROM thread_messages WHERE owner_id = %s ORDER BY id", (owner.owner_id,)).fetchall()]
    assert stored == ["What is a kernel?", conductor.answer], stored


# --- errors as sentences with a next step -------------------------------------------------------

def alerts(page):
    return conversation(page).locator("[role='alert']")


def test_an_utterance_the_server_refuses_reads_as_a_sentence_and_keeps_the_words(open_page, new_owner):
    from zerg.api.routes.jarvis import UTTERANCE_CHARS

    page = open_page(new_owner("refused"))
    words = "x" * UTTERANCE_CHARS

    def one_more(route):  # the real server's 422 for one character over (the textarea never sends it)
        body = json.loads(route.request.post_data)
        route.continue_(post_data=json.dumps({**body, "utterance": body["utterance"] + "y"}))

    page.route("**/api/jarvis/route", one_more)
    ask(page, words)
    expect(alerts(page)).to_have_count(1)
    expect(alerts(page)).to_have_text("Your message is too long: at most 4,000 characters. Shorten it and send it again.")
    expect(message_box(page)).to_have_value(words)
    expect(alerts(page).get_by_role("button", name="Retry")).to_have_count(0)  # the next step is to edit
    screenshot(page, "chat-error-too-long")


def test_text_over_the_runs_byte_limit_is_stopped_in_the_page_with_its_counter(open_page, new_owner, served):
    from tests.support.browser import api_client

    owner = new_owner("bytes")
    page = open_page(owner)
    posts: list[str] = []
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
    words = "漢" * 2800  # 2,800 characters (under 4,000) but 8,400 bytes of UTF-8 (over 8,192)
    box = message_box(page)
    box.fill(words)
    counter = page.locator("#message-counter")
    expect(counter).to_have_text("Too long: 8,400 / 8,192 bytes; shorten it to send")
    expect(counter).to_have_class("counter at-limit")
    expect(page.get_by_role("button", name="Send")).to_be_disabled()
    box.press("Enter")
    expect(box).to_have_value(words)  # kept, and nothing was sent
    assert posts == []
    # The server's rule, the same: 413 for those bytes, and the page's 8,192 is its default.
    client = api_client(served.url, owner)
    refused = client.post("/api/jarvis/supervisor", json={"task": words})
    assert refused.status_code == 413 and "8192" in refused.json()["message"], refused.text
    box.fill("漢" * 2730)  # 8,190 bytes: sendable
    expect(counter).to_have_text("8,190 / 8,192 bytes")
    expect(page.get_by_role("button", name="Send")).to_be_enabled()
    screenshot(page, "chat-error-bytes")


def test_no_network_reads_as_a_sentence_and_retry_sends_it_once_back_online(open_page, new_owner):
    page = open_page(new_owner("offline"))
    expect(conversation(page).locator(".empty")).to_be_visible()  # the thread loaded: then the network goes
    page.context.set_offline(True)
    ask(page, "What time is it?")
    expect(alerts(page)).to_have_text(re.compile(r"^Jarvis cannot be reached\. Check your connection, then try again\."))
    expect(message_box(page)).to_have_value("What time is it?")
    screenshot(page, "chat-error-offline")
    page.context.set_offline(False)
    alerts(page).get_by_role("button", name="Retry").click()
    expect(conversation(page).locator("article[data-mode='quick']")).to_have_count(1)
    expect(alerts(page)).to_have_count(0)
    expect(conversation(page).locator("article[data-role='user']", has_text="What time is it?")).to_have_count(1)
    expect(message_box(page)).to_have_value("")


def test_a_failed_run_says_so_in_one_sentence_and_run_again_answers(open_page, new_owner, conductor, pool):
    owner = new_owner("runfail")
    conductor.supervisor_down = True
    page = open_page(owner)
    with page.expect_response(is_supervisor_post) as posted:
        ask(page, TASK)
    run_id = supervisor_run_id(posted.value)
    ending = turn(page, run_id).locator(".ending")
    expect(ending).to_contain_text("This run failed")
    expect(conversation(page).locator("article[data-mode='quick']")).to_have_count(1)  # the quick stand-in
    expect(page.get_by_role("status", name="Connection")).to_have_text("Live")  # a run that ended is no lost link
    screenshot(page, "chat-error-run-failed")
    conductor.supervisor_down = False
    with page.expect_response(is_supervisor_post) as again:
        ending.get_by_role("button", name="Run again").click()
    second = supervisor_run_id(again.value)
    expect(answers(page, second)).to_have_count(1)
    assert [r["task"] for r in owner_runs(pool, owner.owner_id)] == [TASK, TASK]


def test_a_cancelled_run_says_so_once_and_run_again_answers(open_page, new_owner, conductor):
    page = open_page(new_owner("cancel"))
    run_id = start_held(page, conductor)
    page.get_by_role("button", name="Cancel").click()
    expect(steps(page, run_id)).to_contain_text("Stopping the workers…")
    conductor.release()  # the held workers end; the run's last event follows
    ending = turn(page, run_id).locator(".ending")
    expect(ending).to_have_text(re.compile(r"^You cancelled this run\."))
    expect(alerts(page)).to_have_count(1)
    screenshot(page, "chat-error-cancelled")
    with page.expect_response(is_supervisor_post) as again:
        ending.get_by_role("button", name="Run again").click()
    expect(answers(page, supervisor_run_id(again.value))).to_have_count(1)


def test_an_interrupted_run_is_one_line_without_pid_or_host_and_run_again_answers(
        open_page, new_owner, conductor, pool):
    from zerg.runs import store as runs

    page = open_page(new_owner("interrupt"))
    run_id = start_held(page, conductor)
    with pool.connection() as conn:  # as the engine closes a run whose process stopped
        run = conn.execute("SELECT * FROM runs WHERE id = %s", (run_id,)).fetchone()
        runs.fail_run(conn, run, "interrupted", "interrupted: the process executing the run (pid 4242 on "
                      "host-77) stopped before it finished; partial results kept")
    ending = turn(page, run_id).locator(".ending")
    expect(ending).to_contain_text("This run was interrupted")
    expect(alerts(page)).to_have_count(1)
    conductor.release()
    log_text = conversation(page).inner_text()
    assert log_text.lower().count("was interrupted") == 1, log_text  # one line, not four
    assert log_text.count("stopped before it finished") == 0, log_text  # the server's raw message: nowhere
    expect(steps(page, run_id)).to_contain_text("Interrupted · 2 workers")
    assert "4242" not in log_text and "host-77" not in log_text, log_text
    screenshot(page, "chat-error-interrupted")
    with page.expect_response(is_supervisor_post) as again:
        ending.get_by_role("button", name="Run again").click()
    expect(answers(page, supervisor_run_id(again.value))).to_have_count(1)


# --- shell: phone, keyboard, the settings menu, the empty state ----------------------------------

def test_a_phone_size_run_keeps_the_composer_on_screen_and_the_toolbar_small(open_page, new_owner, conductor):
    page = open_page(new_owner("phone"), viewport=PHONE)
    geometry = """() => { const r = (s) => document.querySelector(s).getBoundingClientRect();
      return { top: r('.top').height, bar: r('.chat-bar').height, composer: r('.composer'),
               height: innerHeight, width: document.documentElement.scrollWidth }; }"""
    g = page.evaluate(geometry)
    assert g["top"] + g["bar"] <= 0.15 * PHONE["height"], g  # the toolbars take little room
    run_id = start_held(page, conductor)
    screenshot(page, "chat-phone-working")
    conductor.release()
    expect(answers(page, run_id)).to_have_count(1)
    for _ in range(2):
        complete_run(page, "Check the load on my servers")
    g = page.evaluate(geometry)
    assert g["composer"]["bottom"] <= g["height"] + 1 and g["composer"]["top"] >= 0, g  # pinned, visible
    assert g["width"] <= PHONE["width"], g
    expect(message_box(page)).to_be_in_viewport(ratio=1)
    screenshot(page, "chat-phone-answered")


def test_slash_focuses_the_composer_and_escape_cancels_a_run_only_when_confirmed(open_page, new_owner, conductor, pool):
    owner = new_owner("keys")
    page = open_page(owner)
    page.locator("body").click(position={"x": 5, "y": 300})
    page.evaluate("document.activeElement.blur()")
    page.keyboard.press("/")
    expect(message_box(page)).to_be_focused()
    expect(message_box(page)).to_have_value("")  # the slash was not typed
    run_id = start_held(page, conductor)
    page.evaluate("document.activeElement.blur()")
    asked: list[str] = []

    def answer(dialog, accept: bool):
        asked.append(dialog.message)
        dialog.accept() if accept else dialog.dismiss()

    page.once("dialog", lambda d: answer(d, False))
    page.keyboard.press("Escape")
    wait_for(lambda: asked, "the confirmation", 60)
    assert "Cancel the running task?" in asked[0]
    expect(turn(page, run_id)).to_have_attribute("data-status", "running")  # dismissed: the run goes on
    page.once("dialog", lambda d: answer(d, True))
    page.keyboard.press("Escape")
    wait_for(lambda: next(r for r in owner_runs(pool, owner.owner_id) if r["id"] == run_id)["status"] == "cancelled",
             "the run cancelled", 60)
    conductor.release()
    expect(turn(page, run_id).locator(".ending")).to_contain_text("You cancelled this run.")
    assert next(r for r in owner_runs(pool, owner.owner_id) if r["id"] == run_id)["status"] == "cancelled"
    assert len(asked) == 2


def test_the_settings_menu_holds_every_control_and_closes_on_escape_and_outside_click(
        open_page, new_owner, conductor):
    page = open_page(new_owner("menu"))
    bar = page.locator(".chat-bar")
    assert bar.get_by_role("button").count() == 1  # one menu instead of five controls on two rows
    button = page.get_by_role("button", name="Settings")
    menu = open_settings(page)
    expect(button).to_have_attribute("aria-expanded", "true")
    expect(menu.get_by_label("Answer length")).to_be_visible()
    expect(menu.get_by_text(re.compile("Push notifications|Enable push notifications"))).not_to_have_count(0)
    expect(menu.get_by_text(re.compile("Speak|Voice input is not supported"))).not_to_have_count(0)
    screenshot(page, "chat-settings-open")
    page.keyboard.press("Escape")
    expect(menu).to_be_hidden()
    expect(button).to_be_focused()
    open_settings(page)
    page.locator(".log").click(position={"x": 5, "y": 5})  # outside it
    expect(menu).to_be_hidden()
    # With a run going, Escape first closes the menu and asks nothing.
    start_held(page, conductor)
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    open_settings(page)
    page.keyboard.press("Escape")
    expect(menu).to_be_hidden()
    assert dialogs == []
    conductor.release()


def test_the_empty_state_greets_the_owner_by_name_and_an_example_fills_the_composer(open_page, new_owner):
    owner = new_owner("empty")
    page = open_page(owner)
    empty = conversation(page).locator(".empty")
    expect(empty).to_contain_text(f", {owner.name}.")
    expect(page.locator(".chat-bar")).to_contain_text(owner.name)  # who is signed in
    examples = empty.get_by_role("button")
    assert examples.count() >= 3
    screenshot(page, "chat-empty")
    first = examples.first.inner_text()
    examples.first.click()
    expect(message_box(page)).to_have_value(first)
    expect(message_box(page)).to_be_focused()
