"""The dashboard's cost answers and polish in a real headless Chromium (issue 29 items 7 and 9):
usage tiles with the change since the period before, a one-category chart that stays an ordinary
bar, tooltips that are elements (keyboard and hover, not native <title>), money that never reads
"$0.0000", relative times with the exact time on hover, empty tables that say so, the schedule
form's preview of the next fires and its time-zone picker, the model picker and tool descriptions,
and "test connection" of a host against the suite's real sshd. A screenshot of each page."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from playwright.sync_api import expect

from tests.support.browser import api_client, screenshot
from tests.support.factories import make_run
from zerg.llm import CallTag, ChatResult, Usage
from zerg.llm.ledger import record_call


def _call(pool, owner_id: int, model: str, at: datetime, tokens_in: int, tokens_out: int, cost: float | None,
          run_id: int | None = None) -> None:
    """One model call in the owner's ledger, dated ``at``."""
    with pool.connection() as conn:
        record_call(conn, CallTag("supervisor", owner_id, run_id), ChatResult(model=model, content="x",
                    usage=Usage(tokens_in, tokens_out, cost)), latency_ms=5)
        conn.execute("UPDATE llm_calls SET created_at = %s WHERE id = (SELECT max(id) FROM llm_calls WHERE owner_id = %s)",
                     (at, owner_id))


def _open(page, panel: str, heading: str) -> None:
    page.goto(f"/#/dashboard/{panel}")
    expect(page.get_by_role("heading", name=heading, level=2)).to_be_visible()


def test_usage_tiles_answer_what_it_cost_with_a_readable_one_category_chart(open_page, new_owner, pool):
    owner = new_owner("usage")
    now = datetime.now(UTC)
    run_id, _ = make_run(pool, owner.owner_id, "check the disks")
    earlier, _ = make_run(pool, owner.owner_id, "an earlier check")
    _call(pool, owner.owner_id, "gpt-4o-mini", now - timedelta(minutes=5), 12_000, 800, 0.004, run_id)
    _call(pool, owner.owner_id, "gpt-4o-mini", now - timedelta(days=40), 6_000, 400, 0.002, earlier)  # the 30 days before
    page = open_page(owner)
    _open(page, "usage", "Usage")

    tiles = page.get_by_role("region", name="Totals for the period")
    expect(tiles.locator("[data-tile=usd] .tile-value")).to_have_text("$0.004")
    expect(tiles.locator("[data-tile=usd] [data-change]")).to_have_text("up 100% vs the 30 days before")
    expect(tiles.locator("[data-tile=tokens] .tile-value")).to_have_text("12,800")
    expect(tiles.locator("[data-tile=runs] .tile-value")).to_have_text("1")
    expect(tiles.locator("[data-tile=runs] [data-change]")).to_have_text("no change vs the 30 days before")
    expect(tiles.locator("[data-tile=per-run] .tile-value")).to_have_text("$0.004")

    # By day: a time line of the 30 days (the days of no calls as empty bars), at most 12 day labels.
    days = page.locator("section.usage").filter(has=page.get_by_role("heading", name="Usage by day")).locator("g.bar")
    expect(days).to_have_count(30)
    assert days.locator("text.tick").count() <= 12
    expect(days.last).to_have_attribute("data-key", now.date().isoformat())

    # One model: one bar, no wider than an ordinary bar, its value written on it.
    section = page.locator("section.usage").filter(has=page.get_by_role("heading", name="Usage by model"))
    chart = section.locator("svg.chart")
    bars = chart.locator("g.bar")
    expect(bars).to_have_count(1)
    bar_box = bars.first.locator("rect.bar-value").bounding_box()
    chart_box = chart.bounding_box()
    assert bar_box["width"] <= chart_box["width"] * 0.1, (bar_box, chart_box)
    expect(bars.first.locator("text.value")).to_have_text("< $0.01")
    assert chart.locator("title").count() == 0  # no native tooltips

    # A real tooltip: the keyboard reaches the bar (one tab stop) and it shows; Escape hides it; hover shows it.
    tip = section.get_by_role("tooltip")
    bars.first.focus()
    expect(tip).to_be_visible()
    expect(tip).to_contain_text("gpt-4o-mini")
    expect(tip).to_contain_text("$0.004")
    expect(tip).to_contain_text("12,000 in · 800 out")
    assert bars.first.get_attribute("aria-describedby") == tip.get_attribute("id")
    page.keyboard.press("Escape")
    expect(tip).to_have_count(0)
    bars.first.hover()
    expect(tip).to_be_visible()
    screenshot(page, "dashboard-usage-tiles")

    expect(page.locator("main.panel")).not_to_contain_text("$0.0000")
    expect(page.get_by_role("table", name="Usage by model").locator("tbody tr").first).to_contain_text("$0.004")


def test_the_usage_chart_steps_between_bars_with_the_arrow_keys(open_page, new_owner, pool):
    owner = new_owner("keys")
    now = datetime.now(UTC)
    for model, cost in (("gpt-4o", 1.25), ("gpt-4o-mini", 0.0004), ("claude-haiku-4-5", 12.4)):
        _call(pool, owner.owner_id, model, now - timedelta(hours=1), 1000, 100, cost)
    page = open_page(owner)
    _open(page, "usage", "Usage")
    section = page.locator("section.usage").filter(has=page.get_by_role("heading", name="Usage by model"))
    bars = section.locator("g.bar")
    expect(bars).to_have_count(3)
    assert [bars.nth(i).get_attribute("tabindex") for i in range(3)] == ["0", "-1", "-1"]
    bars.first.focus()
    expect(section.get_by_role("tooltip")).to_contain_text("claude-haiku-4-5")
    page.keyboard.press("ArrowRight")
    expect(section.get_by_role("tooltip")).to_contain_text("gpt-4o")
    page.keyboard.press("End")
    expect(section.get_by_role("tooltip")).to_contain_text("gpt-4o-mini")
    expect(section.get_by_role("tooltip")).to_contain_text("< $0.001")
    table = page.get_by_role("table", name="Usage by model")
    expect(table.locator("tr[data-key='claude-haiku-4-5'] td").last).to_have_text("$12.40")
    expect(table.locator("tr[data-key='gpt-4o'] td").last).to_have_text("$1.25")


def test_the_run_list_shows_relative_times_totals_and_cost_bars(open_page, new_owner, pool):
    owner = new_owner("runs")
    cheap, _ = make_run(pool, owner.owner_id, "a cheap run")
    dear, _ = make_run(pool, owner.owner_id, "a dear run")
    with pool.connection() as conn:
        for run_id, cost, minutes in ((cheap, 0.004, 3), (dear, 0.02, 120)):
            conn.execute("UPDATE runs SET status = 'success', finished_at = now(), created_at = now() - %s, "
                         "tokens_in = 1000, tokens_out = 100, cost_usd = %s WHERE id = %s",
                         (timedelta(minutes=minutes), cost, run_id))
    page = open_page(owner)
    _open(page, "runs", "Runs")
    cheap_row, dear_row = page.locator(f"tr[data-run-id='{cheap}']"), page.locator(f"tr[data-run-id='{dear}']")
    created = cheap_row.locator("time")
    expect(created).to_have_text(re.compile(r"^[34] min ago$"))  # 3 min, or a slow page later
    assert re.search(r"20\d\d", created.get_attribute("title") or ""), "the exact time on hover"
    expect(dear_row.locator("time")).to_have_text("2 h ago")
    expect(cheap_row.locator("[data-cost]")).to_have_text("$0.004")
    expect(dear_row.locator("[data-cost]")).to_have_text("$0.02")
    assert dear_row.locator(".value-bar-fill").evaluate("el => el.style.width") == "100%"
    assert cheap_row.locator(".value-bar-fill").evaluate("el => el.style.width") == "20%"
    total = page.locator("[data-runs-total]")
    expect(total).to_contain_text("Total of these 2 runs")
    expect(total.locator("td").last).to_have_text("$0.024")
    screenshot(page, "dashboard-runs-list")


EMPTY = [("runs", "Runs", "No runs yet"), ("schedules", "Schedules", "No schedules yet"),
         ("hosts", "Hosts", "No SSH hosts yet"), ("memory", "Memory", "No facts yet"),
         ("contacts", "Contacts", "No contacts yet"), ("contacts", "Contacts", "No notifications sent yet"),
         ("thread", "Thread", "No messages yet"), ("usage", "Usage", "No model calls in this period"),
         ("approvals", "Approvals", "No answered approvals yet")]


def test_every_empty_table_says_so(open_page, new_owner):
    page = open_page(new_owner("empty"))
    for panel, heading, text in EMPTY:
        _open(page, panel, heading)
        row = page.locator("tr.empty-row").filter(has_text=text).first
        expect(row).to_be_visible()
        assert row.locator("td").get_attribute("colspan"), f"{panel}: the empty row spans the table"
        screenshot(page, f"dashboard-empty-{panel}")


def test_the_schedule_form_previews_the_next_fires_and_picks_a_time_zone(open_page, new_owner):
    page = open_page(new_owner("cron"))
    _open(page, "schedules", "Schedules")
    previews = []
    page.on("request", lambda r: previews.append(r) if r.url.endswith("/api/jarvis/schedules/preview") else None)
    zones = page.locator("#schedule-zones option")
    assert zones.count() > 300 and page.locator("#schedule-zones option[value='Europe/Berlin']").count() == 1
    page.get_by_label("Time zone").fill("Europe/Berlin")
    expression = page.get_by_label("Expression")
    typed = "30 6 * * 1-5"
    expression.press_sequentially(typed)
    fires = page.locator("[data-preview] li")
    expect(fires).to_have_count(5)
    expect(page.locator("[data-preview]")).to_contain_text("(Europe/Berlin)")
    for i in range(5):
        expect(fires.nth(i)).to_contain_text("06:30")
    assert len(previews) < len(typed), "debounced: not one request per keystroke"
    screenshot(page, "dashboard-schedules-preview")

    expression.fill("0 6 * *")
    expect(page.locator("[data-preview-error]")).to_contain_text("cron: 4 fields given")
    expression.fill("0 6 * * *")
    page.get_by_label("Time zone").fill("Europe/Berln")
    expect(page.locator("[data-preview-error]")).to_contain_text("timezone: unknown time zone 'Europe/Berln'")
    page.get_by_label("Timing").select_option("rate")
    page.get_by_label("Time zone").fill("UTC")
    expression.fill("15 minutes")
    expect(fires).to_have_count(5)
    screenshot(page, "dashboard-schedules-preview-rate")

    page.get_by_label("Name").fill("weekday disks")
    page.get_by_label("Task", exact=True).fill("check the disks")
    page.get_by_label("Timing").select_option("cron")
    expression.fill("30 6 * * 1-5")
    page.get_by_label("Time zone").fill("Europe/Berlin")
    page.get_by_role("button", name="Create schedule").click()
    row = page.get_by_role("table", name="Schedules").locator("tbody tr").filter(has_text="weekday disks")
    expect(row).to_contain_text("Europe/Berlin")
    expect(row.locator("time").first).to_have_text(re.compile(r"^in \d+ (min|h|days?)$|^tomorrow$"))


def test_the_agent_form_offers_the_deployments_models_and_says_what_each_tool_does(open_page, new_owner):
    page = open_page(new_owner("agents"))
    _open(page, "agents", "Agents")
    supervisor = page.get_by_role("form", name="supervisor configuration")
    choices = page.locator("#models-supervisor option")
    expect(choices.first).to_be_attached()
    values = choices.evaluate_all("els => els.map((e) => e.value)")
    assert "openai:gpt-4.1" in values and "openai-chat:gpt-4o-mini" in values
    assert not any(v.startswith("anthropic:") for v in values), "only providers the server can reach (no Anthropic key)"
    assert "per million tokens" in (choices.first.get_attribute("label") or "")
    worker = page.get_by_role("form", name="worker configuration")
    ssh = worker.locator("label[data-tool='ssh_exec']")
    expect(ssh).to_contain_text("Run a shell command on one of the user's servers over SSH.")
    assert worker.locator("label.tool").count() == worker.locator("label.tool .tool-about:not(:empty)").count()
    screenshot(page, "dashboard-agents-models")

    model = supervisor.get_by_label("Model", exact=True)
    model.fill("openai-chat:gpt-4o-mini")
    _save(page)
    page.reload()
    expect(page.get_by_role("form", name="supervisor configuration").get_by_label("Model", exact=True)).to_have_value(
        "openai-chat:gpt-4o-mini")
    # Free text stays allowed: a compatible server's own tagged id.
    model = page.get_by_role("form", name="supervisor configuration").get_by_label("Model", exact=True)
    model.fill("llama3.1:8b")
    assert _save(page)["model"] == "llama3.1:8b"


def _save(page) -> dict:
    """Press "Save supervisor"; the server's answer (200)."""
    with page.expect_response(lambda r: r.url.endswith("/api/jarvis/agents/supervisor") and r.request.method == "PUT") as put:
        page.get_by_role("button", name="Save supervisor").click()
    assert put.value.status == 200, put.value.text()
    return put.value.json()


def test_test_connection_runs_true_on_the_host_and_shows_its_host_key(open_page, new_owner, served, ssh_server, tmp_path):
    from tests.support.ssh_server import _keypair

    owner = new_owner("hosts")
    client = api_client(served.url, owner)
    body = {"hostname": "127.0.0.1", "port": ssh_server.port, "user": ssh_server.user,
            "private_key": ssh_server.client_key.read_text(), "host_key": ssh_server.host_key}
    resp = client.put("/api/jarvis/hosts/cube", json=body)
    assert resp.status_code == 200, resp.text
    pinned = resp.json()["host_key_fingerprint"]
    resp = client.put("/api/jarvis/hosts/impostor", json=body | {"host_key": _keypair(tmp_path / "other_host_key")})
    assert resp.status_code == 200, resp.text
    page = open_page(owner)
    _open(page, "hosts", "Hosts")
    page.get_by_role("button", name="Test connection to cube").click()
    good = page.locator("[data-test-result][data-alias='cube']")
    expect(good).to_have_attribute("data-ok", "true")
    expect(good).to_contain_text(f"Connected to {ssh_server.user}@127.0.0.1:{ssh_server.port}")
    expect(good).to_contain_text(f"pinned host key {pinned}")
    expect(good).to_contain_text("`true` exited 0")
    page.get_by_role("button", name="Test connection to impostor").click()
    bad = page.locator("[data-test-result][data-alias='impostor']")
    expect(bad).to_have_attribute("data-ok", "false")
    expect(bad).to_contain_text("host key does not match the pinned key")
    expect(bad).to_contain_text(f"The server presents {pinned}")
    updated = page.locator("tr").filter(has_text="cube").first.locator("time")
    expect(updated).to_have_text(re.compile(r"^(just now|1 min ago)$"))
    screenshot(page, "dashboard-hosts-test-connection")
