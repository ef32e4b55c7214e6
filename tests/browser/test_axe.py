"""axe-core on every page of the web client, in light and in dark, in a real headless Chromium: 0 critical
and 0 serious findings; one visible-or-screen-reader <h1> per page; a skip link to the main content.

axe-core is the web app's devDependency (web/node_modules/axe-core, installed by ``npm ci``): it is
injected into each page from there (an init script, which the page's CSP does not govern), never fetched
at run time. Dark is the ``prefers-color-scheme: dark`` the browser context emulates.

The pages: sign-in; the chat empty, then with a conversation (seeded markdown turns, then a real run with
its workers and evidence); the inbox; every dashboard panel; a run's detail; a worker's detail with a tool
output open. Each page waits until its requests are answered and the DOM is still for a few frames, then
axe runs on the whole document. A screenshot of each page and scheme goes to
``.zerg/test-artifacts/screenshots/a11y-<scheme>-<page>.png``.

Run just these: ``.venv/bin/python -m pytest tests/browser -m browser -k axe -p no:xdist``. A failure lists,
page by page, each rule id with its impact, the elements (CSS targets) and, for contrast, the figures
(foreground, background, ratio found, ratio needed) — enough to find the CSS variable to change."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.support.browser import (
    ROOT,
    api_client,
    complete_run,
    conversation,
    message_box,
    screenshot,
)
from tests.support.factories import make_run
from tests.support.parts import need

AXE = ROOT / "web" / "node_modules" / "axe-core" / "axe.min.js"
BLOCKING = ("critical", "serious")
PANELS = {"workers": "Workers", "thread": "Thread", "runs": "Runs", "usage": "Usage", "schedules": "Schedules",
          "memory": "Memory", "contacts": "Contacts", "hosts": "Hosts", "agents": "Agents", "approvals": "Approvals",
          "mcp": "MCP servers"}

# Counts the page's fetches in flight and the animation frames since the last fetch or DOM change:
# a page is settled when nothing is in flight and the DOM has been still for QUIET_FRAMES frames.
SETTLE = """
(() => {
  window.__a11y = { inflight: 0, quiet: 0 };
  const original = window.fetch;
  window.fetch = function (...args) {
    window.__a11y.inflight += 1;
    window.__a11y.quiet = 0;
    const done = () => { window.__a11y.inflight -= 1; window.__a11y.quiet = 0; };
    const p = original.apply(this, args);
    p.then(done, done);
    return p;
  };
  const tick = () => { window.__a11y.quiet += 1; requestAnimationFrame(tick); };
  requestAnimationFrame(tick);
  new MutationObserver(() => { window.__a11y.quiet = 0; })
    .observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
})();
"""
QUIET_FRAMES = 5

RUN_AXE = """async () => {
  const result = await axe.run(document, { resultTypes: ['violations'] });
  const h1 = [...document.querySelectorAll('h1')].filter((h) => h.checkVisibility())
    .map((h) => h.textContent.trim());
  return {
    version: axe.version, h1,
    violations: result.violations.map((v) => ({
      id: v.id, impact: v.impact, help: v.help, helpUrl: v.helpUrl,
      nodes: v.nodes.map((n) => ({
        target: n.target.map(String), impact: n.impact, html: n.html.slice(0, 160),
        data: [...n.any, ...n.all, ...n.none].map((c) => c.data).filter((d) => d && typeof d === 'object'),
      })),
    })),
  };
}"""

SEEDED_TURNS = [
    ("user", "Show me the disk check as code and a table", {}),
    ("assistant", ("Here it is:\n\n```sh\ndf -h /\n```\n\n| host | used |\n|---|---|\n| cube | 78% |\n\n"
                   "See [the docs](https://example.com/docs) and `inline code`.\n\n> a quoted line"), {"mode": "quick"}),
]


def settle(page) -> None:
    """Wait until no request of the page is in flight and its DOM has been still for a few frames."""
    page.wait_for_function(f"() => window.__a11y && window.__a11y.inflight === 0 && window.__a11y.quiet >= {QUIET_FRAMES}")


def contrast(data: dict) -> str:
    if "contrastRatio" not in data:
        return ""
    return (f"contrast {data.get('contrastRatio')}:1, needs {data.get('expectedContrastRatio')} "
            f"(fg {data.get('fgColor')} on bg {data.get('bgColor')}, {data.get('fontSize')} {data.get('fontWeight')})")


def describe(scheme: str, found: dict[str, dict]) -> str:
    """The blocking findings, rule by rule: each element (CSS target) with its figures and the pages it
    fails on (the header and the side nav are on many), then the pages without exactly one <h1>."""
    rules: dict[tuple[str, str, str, str], dict[tuple[str, str], list[str]]] = {}
    for name, report in found.items():
        for v in report["violations"]:
            if v["impact"] not in BLOCKING:
                continue
            elements = rules.setdefault((v["id"], v["impact"], v["help"], v["helpUrl"]), {})
            for node in v["nodes"]:
                figures = "; ".join(filter(None, (contrast(d) for d in node["data"])))
                elements.setdefault((" ".join(node["target"]), figures or node["html"]), []).append(name)
    lines = []
    for (rule, impact, help_, url), elements in rules.items():
        lines.append(f"{rule} ({impact}, {scheme}): {help_} — {url}")
        for (target, figures), pages in elements.items():
            where = ", ".join(pages) if len(pages) <= 3 else f"{', '.join(pages[:3])} and {len(pages) - 3} more pages"
            lines.append(f"    {target}  {figures}  [{where}]")
    for name, report in found.items():
        if len(report["h1"]) != 1:
            lines.append(f"page-h1 ({scheme} · {name}): {len(report['h1'])} rendered <h1> {report['h1']}, want exactly 1")
    return "\n".join(lines)


def seed(served, pool, owner) -> None:
    """What the pages list, so each is checked with content: thread turns with markdown, an inbox item,
    a schedule, a memory file."""
    from zerg.alerts import inbox
    from zerg.alerts.severity import Assessment
    from zerg.runs import threads

    with pool.connection() as conn:
        thread_id = threads.find_or_create_thread(conn, owner.owner_id)
        threads.append_messages(conn, owner.owner_id, thread_id, None, SEEDED_TURNS)
    client = api_client(served.url, owner)
    resp = client.put("/api/jarvis/memory/file", params={"path": "notes/servers.md"},
                      json={"content": "# Servers\n\ncube: the NAS", "title": "Servers"})
    assert resp.status_code == 201, resp.text
    resp = client.post("/api/jarvis/schedules", json={"name": "disk", "task": "check disk", "rate": "1 day"})
    assert resp.status_code == 201, resp.text
    run_id, _ = make_run(pool, owner.owner_id, "background disk check")
    with pool.connection() as conn:
        conn.execute("UPDATE runs SET status = 'success', trigger = 'schedule', finished_at = now() WHERE id = %s",
                     (run_id,))
        inbox.add(conn, owner.owner_id, run_id, None,
                  Assessment("warning", "Disk on cube is 91% full", "Free space **soon**.", "model"))


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_finds_nothing_critical_or_serious_on_any_page(scheme, open_page, new_owner, served, pool):
    need(None if AXE.is_file() else f"axe-core is not installed ({AXE} is missing): cd web && npm ci",
         "the axe-core checks")
    owner = new_owner("axe")
    page = open_page(None, color_scheme=scheme)
    page.context.add_init_script(path=str(AXE))
    page.context.add_init_script(script=SETTLE)
    found: dict[str, dict] = {}

    def check(name: str) -> None:
        settle(page)
        found[name] = page.evaluate(RUN_AXE)
        screenshot(page, f"a11y-{scheme}-{name}")

    page.goto("/")
    expect(page.get_by_label("Device secret")).to_be_visible()
    # index.html paints "Loading…" before the script runs (the first paint); the app's render replaces it
    expect(page.get_by_text("Loading…")).to_have_count(0)
    check("sign-in")
    page.get_by_label("Device secret").fill(owner.device_secret)
    page.get_by_role("button", name="Sign in").click()
    expect(message_box(page)).to_be_visible()
    check("chat-empty")

    seed(served, pool, owner)
    page.reload()
    expect(conversation(page).get_by_text("cube", exact=True)).to_be_visible()
    run_id = complete_run(page, "Investigate disk usage and memory on my servers")
    check("chat-conversation")

    page.goto("/#/inbox")
    expect(page.get_by_text("Disk on cube is 91% full")).to_be_visible()
    check("inbox")
    for panel, heading in PANELS.items():
        page.goto(f"/#/dashboard/{panel}")
        expect(page.get_by_role("heading", name=heading, level=2)).to_be_visible()
        check(f"dashboard-{panel}")
    page.goto(f"/#/dashboard/runs/{run_id}")
    job = page.get_by_role("main").locator("li[data-job-id]").first  # the chat, hidden, has its own
    expect(job).to_be_visible()
    job_id = job.get_attribute("data-job-id")
    check("run-detail")
    page.goto(f"/#/dashboard/workers/{job_id}")
    page.get_by_role("button", name="tool_calls/001_container_exec.txt", exact=True).click()
    expect(page.get_by_label("File content")).to_contain_text("EVIDENCE-")
    check("worker-detail")

    report = describe(scheme, found)
    versions = {r["version"] for r in found.values()}
    summary = {name: sorted({v["id"] for v in r["violations"]}) for name, r in found.items()}
    Path(ROOT / ".zerg" / "test-artifacts").mkdir(parents=True, exist_ok=True)
    (ROOT / ".zerg" / "test-artifacts" / f"axe-{scheme}.json").write_text(json.dumps(found, indent=1))
    assert not report, (f"axe-core {', '.join(versions)} in {scheme}: critical/serious findings "
                        f"(all findings by page: {summary}; full report .zerg/test-artifacts/axe-{scheme}.json)\n{report}")


def test_the_skip_link_is_the_first_stop_and_moves_focus_to_the_main_content(open_page, new_owner):
    page = open_page(new_owner("skip"))
    for route in ("/#/", "/#/inbox", "/#/dashboard/runs"):
        page.goto(route)
        skip = page.get_by_role("link", name="Skip to main content")
        first = page.evaluate("""() => [...document.querySelectorAll('a[href], button, input, select, textarea, [tabindex]')]
            .find((el) => el.tabIndex >= 0 && el.checkVisibility() && !el.disabled)?.textContent""")
        assert first == "Skip to main content", (route, first)
        skip.focus()
        expect(skip).to_be_visible()  # shown when focused
        skip.press("Enter")
        focused = page.evaluate("() => document.activeElement.tagName + ':' + document.activeElement.checkVisibility()")
        assert focused == "MAIN:true", (route, focused)
        assert page.evaluate("location.hash") == route[1:], route  # the hash route is left alone
