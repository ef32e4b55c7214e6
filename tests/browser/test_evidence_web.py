"""Evidence and traces in a real headless Chromium (issue 29 items 4 and 5): the numbered sources under an
answer open the worker on its result and its tool output; the file viewer jumps to the end of a file
larger than one range, searches the loaded range and downloads the file; a run's detail draws its
waterfall with one bar per worker nested under the supervisor, from the run's spans (``zerg serve``
keeps them by default) and from its events (a server with ``ZERG_TRACE_STORE=off``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.support.browser import (
    WAIT_MS,
    ServedZerg,
    answers,
    ask,
    complete_run,
    is_supervisor_post,
    screenshot,
    sign_in,
    supervisor_run_id,
    worker_rows,
)
from tests.support.waiting import wait_for

INVESTIGATION = "Investigate disk usage and memory on my servers"


def sources(page, run_id: int):
    return answers(page, run_id).get_by_role("group", name="Sources").locator("li")


def test_numbered_sources_under_the_answer_open_the_worker_on_its_result_and_tool_output(open_page, new_owner):
    page = open_page(new_owner())
    run_id = complete_run(page, INVESTIGATION)
    items = sources(page, run_id)
    expect(items).to_have_count(2)
    for n, task in enumerate(("Check disk usage", "Check memory"), start=1):
        item = items.nth(n - 1)
        link = item.get_by_role("link", name=f"[{n}] {task}")
        expect(link).to_be_visible()
        expect(item).to_have_attribute("data-status", "success")
        expect(item.get_by_label("success")).to_have_text("✓")
        expect(item).to_contain_text(re.compile(r"\d+(\.\d)? (ms|s)"))  # how long it took
        expect(item.locator("[data-preview]")).to_have_text(f"summary of {task}")
        expect(item.locator("[data-command]")).to_contain_text("$ echo EVIDENCE-")
    screenshot(page, "evidence-sources-under-the-answer")
    page.set_viewport_size({"width": 390, "height": 844})  # a phone: each source stays inside its answer
    right = answers(page, run_id).evaluate("el => el.getBoundingClientRect().right")
    assert all(box["x"] + box["width"] <= right + 0.5 for box in (items.nth(i).bounding_box() for i in range(2)))
    screenshot(page, "evidence-sources-phone")
    page.set_viewport_size({"width": 1280, "height": 900})

    page.reload()  # the thread as stored: the same sources, titled again from the run document
    expect(sources(page, run_id)).to_have_count(2)
    expect(sources(page, run_id).nth(0).locator("[data-command]")).to_contain_text("$ echo EVIDENCE-")

    sources(page, run_id).nth(0).get_by_role("link").click()
    expect(page.get_by_role("heading", name=re.compile(r"^Job \d+$"))).to_be_visible()
    # The worker opens on its result ...
    expect(page.get_by_role("region", name="File result.txt")).to_be_visible()
    expect(page.get_by_label("File content")).to_contain_text("Finished: Check disk usage")
    expect(page.locator("[data-summary]")).to_have_text("summary of Check disk usage")
    screenshot(page, "evidence-worker-on-its-result")
    # ... with the commands it ran, each opening its output.
    calls = page.get_by_role("list", name="Tool calls").locator("li")
    expect(calls).to_have_count(1)
    calls.get_by_role("button", name=re.compile(r"^\$ echo EVIDENCE-")).click()
    expect(page.get_by_role("region", name="File tool_calls/001_container_exec.txt")).to_be_visible()
    expect(page.get_by_label("File content")).to_contain_text("EVIDENCE-")
    expect(page.get_by_label("File content")).to_contain_text("exit_code: 0")
    screenshot(page, "evidence-worker-tool-output")


def test_the_file_viewer_jumps_to_the_end_searches_the_loaded_range_and_downloads(open_page, new_owner, conductor):
    conductor.commands = {"Check disk usage": "seq 1 40000"}  # ~229 KB of output: more than one 64 KiB range
    page = open_page(new_owner())
    run_id = complete_run(page, INVESTIGATION)
    sources(page, run_id).nth(0).get_by_role("link").click()
    page.get_by_role("list", name="Tool calls").get_by_role("button", name="$ seq 1 40000").click()
    viewer = page.get_by_role("region", name="File tool_calls/001_container_exec.txt")
    content = viewer.get_by_label("File content")
    expect(content).to_contain_text("$ seq 1 40000")
    size = int(viewer.locator("[data-range]").inner_text().rsplit(" of ", 1)[1].replace(",", ""))
    assert size > 200_000
    expect(viewer.locator("[data-range]")).to_have_text(f"Bytes 0–65,535 of {size:,}")

    viewer.get_by_role("button", name="Jump to end").click()
    expect(viewer.locator("[data-range]")).to_have_text(re.compile(rf"–{size - 1:,} of {size:,}$"))
    expect(content).to_contain_text("\n40000\n")
    expect(content).to_contain_text("exit_code: 0")
    expect(content).not_to_contain_text("$ seq 1 40000")  # the first range is not what is shown
    wait_for(lambda: content.evaluate("el => el.scrollTop + el.clientHeight >= el.scrollHeight - 2"),
             "the end of the text scrolled into view")
    screenshot(page, "evidence-file-viewer-end")

    search = viewer.get_by_label("Search in file")
    found = content.inner_text().count("3999")  # 33999 and 39990..39999 at least, in the last range
    assert found >= 11
    search.fill("3999")
    matches = viewer.get_by_role("status")
    expect(matches).to_have_text(f"1 of {found} in the loaded range")
    expect(content.locator("mark")).to_have_count(found)
    expect(content.locator("mark[data-current]")).to_have_count(1)
    search.press("Enter")
    expect(matches).to_have_text(f"2 of {found} in the loaded range")
    viewer.get_by_role("button", name="Previous match").click()
    viewer.get_by_role("button", name="Previous match").click()
    expect(matches).to_have_text(f"{found} of {found} in the loaded range")
    expect(content.locator("mark[data-current]")).to_be_in_viewport()
    search.fill("$ seq")  # in the file, but not in the loaded range: said so
    expect(matches).to_have_text("no match in the loaded range")
    screenshot(page, "evidence-file-viewer-search")
    search.fill("")

    with page.expect_download() as download:
        viewer.get_by_role("link", name="Download").click()
    got = download.value
    assert got.suggested_filename == "001_container_exec.txt"
    data = Path(got.path()).read_bytes()
    assert len(data) == size and data.startswith(b"$ seq 1 40000\n") and b"\n40000\n" in data


def waterfall(page):
    return page.get_by_role("region", name="Trace")


def check_waterfall(page, run_id: int, source: str) -> None:
    page.goto(f"/#/dashboard/runs/{run_id}")
    trace = waterfall(page)
    expect(trace).to_have_attribute("data-source", source)
    tree = trace.get_by_role("list", name="Trace waterfall")
    root = tree.locator(":scope > li")
    expect(root).to_have_count(1)
    expect(root).to_have_attribute("data-kind", "run")
    workers = root.locator("li[data-kind='worker']")
    expect(workers).to_have_count(2)  # one bar per worker, nested under the run's supervisor
    for task in ("Check disk usage", "Check memory"):
        row = workers.filter(has_text=task)
        expect(row).to_have_count(1)
        expect(row).to_have_attribute("data-status", "ok")
        expect(row.locator(":scope > .wf-span .wf-bar")).to_be_visible()
        expect(row.locator("li[data-kind='tool']")).to_have_count(1)  # its command, nested under it
    expect(root.locator(":scope > ol > li[data-kind='supervisor']").first).to_be_visible()
    # tokens and cost on the worker rows; payloads folded until asked for
    expect(workers.first.locator(":scope > .wf-span .wf-tok")).to_contain_text(re.compile(r"\d+ in · \d+ out"))
    details = trace.locator("details")
    assert details.count() > 0 and all(not d.evaluate("el => el.open") for d in details.all())
    payload = workers.first.locator(":scope > details > .wf-payload")
    expect(payload).to_be_hidden()
    workers.first.locator(":scope > details > summary").click()  # a row opens on its payload
    expect(payload).to_be_visible()
    # the answer rendered as the chat renders it
    expect(page.get_by_role("region", name="Answer").locator("strong")).to_have_text("78%")


def test_the_run_detail_draws_the_waterfall_of_its_spans(open_page, new_owner, pool):
    owner = new_owner()
    page = open_page(owner)
    run_id = complete_run(page, INVESTIGATION)
    # `zerg serve` keeps every run's spans by default: the root span is written when the run closes.
    def spans():
        with pool.connection() as conn:
            return conn.execute("SELECT name, parent_span_id FROM run_spans WHERE run_id = %s AND owner_id = %s",
                                (run_id, owner.owner_id)).fetchall()
    wait_for(lambda: any(s["parent_span_id"] is None for s in spans())
             and sum(s["name"] == "invoke_agent worker" for s in spans()) == 2, "the run's spans kept", limit_s=60)
    check_waterfall(page, run_id, "spans")
    trace = waterfall(page)
    expect(trace.locator("li[data-kind='model']").first).to_be_visible()  # model calls, from the spans only
    expect(trace.locator("li[data-kind='supervisor']")).to_have_count(3)  # plan, resume, finalize
    screenshot(page, "run-detail-waterfall-spans")
    page.emulate_media(color_scheme="dark")
    screenshot(page, "run-detail-waterfall-spans-dark")
    page.goto("/#/")
    expect(sources(page, run_id)).to_have_count(2)
    screenshot(page, "evidence-sources-dark")


@pytest.fixture(scope="module")
def untraced(database_url, scripted, tmp_path_factory):
    """A second `zerg serve` on the same database and model, keeping no spans."""
    server = ServedZerg(database_url, scripted.base_url, tmp_path_factory.mktemp("zerg-serve-untraced"),
                        ZERG_TRACE_STORE="off")
    yield server
    server.stop()


def test_the_run_detail_draws_the_waterfall_from_its_events_when_it_kept_no_spans(chromium, untraced, new_owner):
    context = chromium.new_context(base_url=untraced.url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(WAIT_MS)
    try:
        page = context.new_page()
        sign_in(page, new_owner())
        run_id = complete_run(page, INVESTIGATION)
        check_waterfall(page, run_id, "events")
        trace = waterfall(page)
        expect(trace.locator("li[data-kind='supervisor']")).to_have_count(2)  # planning and answering turns
        expect(trace.locator("li[data-kind='tool']").first).to_contain_text("container_exec · echo EVIDENCE-")
        screenshot(page, "run-detail-waterfall-events")
    finally:
        context.close()


def test_a_running_runs_waterfall_shows_its_workers_live_and_redraws_as_they_finish(open_page, new_owner, conductor):
    page = open_page(new_owner())
    conductor.hold()  # the workers stay running until released
    with page.expect_response(is_supervisor_post) as posted:
        ask(page, INVESTIGATION)
    run_id = supervisor_run_id(posted.value)
    for i in range(2):
        expect(worker_rows(page).nth(i)).to_have_attribute("data-status", "running")
    page.goto(f"/#/dashboard/runs/{run_id}")
    trace = waterfall(page)
    expect(trace).to_have_attribute("data-source", "events")  # spans come at the workers' end
    root = trace.get_by_role("list", name="Trace waterfall").locator(":scope > li")
    expect(root).to_have_attribute("data-status", "running")
    workers = root.locator("li[data-kind='worker']")
    expect(workers).to_have_count(2)
    for i in range(2):
        expect(workers.nth(i)).to_have_attribute("data-status", "running")
    screenshot(page, "run-detail-waterfall-running")
    conductor.release()  # the page follows the run's stream: no reload
    for i in range(2):
        expect(workers.nth(i)).to_have_attribute("data-status", "ok")
    expect(root).to_have_attribute("data-status", "ok")
    expect(page.get_by_role("region", name="Answer").locator("strong")).to_have_text("78%")
    screenshot(page, "run-detail-waterfall-finished-live")
