"""The dashboard in a real headless Chromium: owner isolation across two signed-in browsers, the
worker browser opening a tool output, usage by component, and a screenshot of every panel."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.support.browser import api_client, complete_run, screenshot
from tests.support.factories import make_run, unique_name

PANELS = ["Workers", "Thread", "Runs", "Usage", "Schedules", "Memory", "Contacts", "Hosts", "Agents", "MCP servers"]


def open_panel(page, name: str) -> None:
    page.get_by_role("link", name=name, exact=True).click()
    expect(page.get_by_role("heading", name=name, level=2)).to_be_visible()


def seed(served, pool, owner, marker: str) -> None:
    """Give ``owner`` a memory file, a schedule and an inbox item, each carrying ``marker``."""
    from zerg.alerts import inbox
    from zerg.alerts.severity import Assessment

    client = api_client(served.url, owner)
    resp = client.put("/api/jarvis/memory/file", params={"path": f"notes/{marker}.md"},
                      json={"content": f"memory of {marker}", "title": marker})
    assert resp.status_code == 201, resp.text
    resp = client.post("/api/jarvis/schedules", json={"name": marker, "task": f"check {marker}", "rate": "1 day"})
    assert resp.status_code == 201, resp.text
    run_id, _ = make_run(pool, owner.owner_id, f"background {marker}")
    with pool.connection() as conn:
        conn.execute("UPDATE runs SET status = 'success', trigger = 'schedule', finished_at = now() WHERE id = %s",
                     (run_id,))
        inbox.add(conn, owner.owner_id, run_id, None, Assessment("warning", f"inbox {marker}", "details", "model"))


def shows(page, marker: str) -> list[str]:
    """Visit the chat, the inbox and each panel that lists an owner's things; where ``marker`` shows."""
    where = []
    page.goto("/#/")
    if page.get_by_role("log", name="Conversation").get_by_text(marker).count():
        where.append("chat")
    page.get_by_role("link", name="Inbox", exact=True).click()
    if page.get_by_text(marker).filter(visible=True).count():
        where.append("inbox")
    for panel in ("Workers", "Runs", "Schedules", "Memory"):
        page.goto(f"/#/dashboard/{panel.lower()}")
        expect(page.get_by_role("heading", name=panel, level=2)).to_be_visible()
        if page.get_by_text(marker).filter(visible=True).count():
            where.append(panel)
    return where


def wait_for_own(page, marker: str) -> None:
    """Each place shows the owner's own marker (so the panel has loaded before absence is judged)."""
    page.goto("/#/")
    expect(page.get_by_role("log", name="Conversation").get_by_text(marker).first).to_be_visible()
    page.get_by_role("link", name="Inbox", exact=True).click()
    expect(page.get_by_text(f"inbox {marker}").filter(visible=True).first).to_be_visible()
    for panel in ("Workers", "Runs", "Schedules", "Memory"):
        page.goto(f"/#/dashboard/{panel.lower()}")
        expect(page.get_by_role("heading", name=panel, level=2)).to_be_visible()
        expect(page.get_by_text(marker).filter(visible=True).first).to_be_visible()


def test_a_second_owner_signed_in_sees_none_of_the_first_owners_things(open_page, new_owner, served, pool, conductor):
    first, second = new_owner("alice"), new_owner("bob")
    mark_a, mark_b = unique_name("MARKA").replace(" ", "-"), unique_name("MARKB").replace(" ", "-")
    conductor.tasks = [f"Check disk usage for {mark_a}", f"Check memory for {mark_a}"]
    page_a = open_page(first)
    seed(served, pool, first, mark_a)
    complete_run(page_a, f"Investigate the servers of {mark_a}")
    wait_for_own(page_a, mark_a)  # the first owner sees its things everywhere

    conductor.tasks = [f"Check disk usage for {mark_b}", f"Check memory for {mark_b}"]
    page_b = open_page(second)  # a second browser context: its own cookie jar
    seed(served, pool, second, mark_b)
    complete_run(page_b, f"Investigate the servers of {mark_b}")
    wait_for_own(page_b, mark_b)
    assert shows(page_b, mark_a) == []
    screenshot(page_b, "dashboard-second-owner-memory")
    # And the first owner's page, still signed in, has not picked up the second's run either.
    assert shows(page_a, mark_b) == []


def test_the_worker_browser_opens_a_tool_output(open_page, new_owner, conductor):
    page = open_page(new_owner())
    complete_run(page, "Investigate disk usage and memory on my servers")
    page.goto("/#/dashboard/workers")
    expect(page.get_by_role("heading", name="Workers", level=2)).to_be_visible()
    expect(page.get_by_label("Status")).to_be_visible()
    expect(page.get_by_label("Search")).to_be_visible()
    row = page.get_by_role("row").filter(has_text="Check disk usage").first
    row.get_by_role("link", name=re.compile(r"^job \d+$")).click()  # the worker's detail
    tool_file = page.get_by_role("button", name="tool_calls/001_container_exec.txt", exact=True)
    expect(tool_file).to_be_visible()
    screenshot(page, "dashboard-worker-detail")
    tool_file.click()
    content = page.get_by_label("File content")
    expect(content).to_contain_text("EVIDENCE-")
    assert content.evaluate("el => el.tagName") == "PRE"
    screenshot(page, "dashboard-worker-tool-output")


def test_usage_shows_the_runs_tokens_by_component(open_page, new_owner, pool):
    owner = new_owner()
    page = open_page(owner)
    complete_run(page, "Investigate disk usage and memory on my servers")
    with pool.connection() as conn:
        ledger = {r["component"]: r for r in conn.execute(
            "SELECT component, count(*) AS calls, sum(tokens_in) AS tokens_in, sum(tokens_out) AS tokens_out "
            "FROM llm_calls WHERE owner_id = %s GROUP BY component", (owner.owner_id,)).fetchall()}
    assert {"supervisor", "worker", "summary"} <= set(ledger)
    page.goto("/#/dashboard/usage")
    expect(page.get_by_role("heading", name="Usage", level=2)).to_be_visible()
    table = page.get_by_role("table", name="Usage by component")
    for component in ("supervisor", "worker", "summary"):
        row = table.locator("tr").filter(has=page.locator("td, th").get_by_text(component, exact=True))
        expect(row).to_have_count(1)
        cells = row.locator("td, th")
        expect(cells.nth(1)).to_have_text(str(ledger[component]["calls"]))
        expect(cells.nth(2)).to_have_text(_number(ledger[component]["tokens_in"]))
        expect(cells.nth(3)).to_have_text(_number(ledger[component]["tokens_out"]))
    expect(page.get_by_role("table", name="Usage by day")).to_be_visible()
    expect(page.get_by_role("table", name="Usage by model")).to_be_visible()
    assert page.locator("svg, canvas").count() >= 1  # the chart beside the tables
    screenshot(page, "dashboard-usage")


def test_schedules_show_their_budgets_and_why_one_paused_itself(open_page, new_owner, served, pool):
    owner = new_owner()
    client = api_client(served.url, owner)
    for name, extra in (("budgeted", {"fire_usd_budget": 0.01, "day_usd_budget": 0.05}), ("ignored", {})):
        resp = client.post("/api/jarvis/schedules", json={"name": name, "task": "check disk", "rate": "1 day", **extra})
        assert resp.status_code == 201, resp.text
    with pool.connection() as conn:  # as a fire finding it idle leaves it
        conn.execute("UPDATE schedules SET enabled = false, next_fire_at = NULL, idle_paused_at = now() "
                     "WHERE owner_id = %s AND name = 'ignored'", (owner.owner_id,))
    page = open_page(owner)
    page.goto("/#/dashboard/schedules")
    rows = page.get_by_role("table", name="Schedules").locator("tbody tr")
    expect(rows.filter(has_text="budgeted").locator("[data-budget]")).to_have_text("$0.01 per fire · $0.05 per day")
    expect(rows.filter(has_text="ignored").locator("[data-state]")).to_have_text("paused: nobody looked at its results")


def test_a_runs_details_show_each_workers_tokens_and_cost(open_page, new_owner, pool):
    owner = new_owner()
    page = open_page(owner)
    run_id = complete_run(page, "Investigate disk usage and memory on my servers")
    with pool.connection() as conn:
        per_job = {r["job_id"]: r["tokens"] for r in conn.execute(
            "SELECT job_id, sum(tokens_in + tokens_out) AS tokens FROM llm_calls "
            "WHERE owner_id = %s AND run_id = %s AND job_id IS NOT NULL GROUP BY job_id", (owner.owner_id, run_id))}
    assert len(per_job) == 2  # the scripted run's two workers
    page.goto(f"/#/dashboard/runs/{run_id}")
    for job_id, tokens in per_job.items():
        usage = page.locator(f"li[data-job-id='{job_id}'] [data-worker-usage]")
        expect(usage).to_contain_text(re.compile(rf"({int(tokens)}|{int(tokens):,}) tokens · (< )?\$"))  # "< $0.001": a tiny cost


def _number(value: int):
    """A token count as the table may print it: plain or with thousands separators."""
    plain = str(int(value))
    grouped = f"{int(value):,}"
    return re.compile(rf"^\s*({re.escape(plain)}|{re.escape(grouped)}|{re.escape(grouped.replace(',', ' '))})\s*$")


def test_every_dashboard_panel_has_its_heading_and_a_screenshot(open_page, new_owner):
    page = open_page(new_owner())
    complete_run(page, "Investigate disk usage and memory on my servers")
    screenshot(page, "client")
    page.goto("/#/dashboard/workers")
    for name in PANELS:
        open_panel(page, name)
        screenshot(page, f"dashboard-{name.lower()}")
    page.get_by_role("link", name="Inbox", exact=True).click()
    screenshot(page, "inbox")
