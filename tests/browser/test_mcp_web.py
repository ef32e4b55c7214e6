"""The dashboard's MCP servers panel in a real headless Chromium against ``zerg serve`` (issue 30 item 1):
the owner registers mcp-server-time (from PyPI, run over stdio in the sandbox by the served process), sees
its tools as workers will call them, lists them again and removes the server; the bearer token field of
a remote server is write-only (never shown back)."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.support.browser import api_client, screenshot


def test_the_owner_registers_mcp_server_time_and_sees_its_tools(open_page, new_owner, served):
    owner = new_owner()
    page = open_page(owner)
    page.goto("/#/dashboard/mcp")
    expect(page.get_by_role("heading", name="MCP servers", level=2)).to_be_visible()
    table = page.get_by_role("table", name="MCP servers")
    expect(table.locator("tr.empty-row")).to_contain_text("No MCP servers yet")
    page.get_by_role("textbox", name="Name").fill("time")
    page.get_by_label("Kind").select_option("command")
    page.get_by_role("textbox", name="Command").fill("mcp-server-time --local-timezone UTC")
    page.get_by_role("button", name="Save server").click()
    expect(page.get_by_role("status")).to_contain_text("Saved time: 2 tool(s)")
    expect(table.get_by_text("mcp__time__get_current_time")).to_be_visible()
    expect(table.get_by_text("(read-only)").first).to_be_visible()
    expect(table.locator("tr.empty-row")).to_have_count(0)
    # the server's descriptions, as plain text; when it was listed, as a relative time (the exact one on hover)
    expect(table.locator(".mcp-about", has_text="Get current time in a specific timezone")).to_be_visible()
    expect(table.locator("time[datetime]")).to_have_count(1)
    expect(table.locator("time[datetime]")).to_have_attribute("title", re.compile(r"\d"))
    screenshot(page, "dashboard-mcp")
    page.get_by_role("button", name="List the tools of time again").click()
    expect(table.get_by_text("mcp__time__convert_time")).to_be_visible()

    page.get_by_role("textbox", name="Name").fill("remote")
    page.get_by_role("textbox", name="URL").fill("https://mcp.invalid/mcp")
    page.get_by_label("Bearer token").fill("tok-never-shown")
    page.get_by_role("button", name="Save server").click()
    expect(page.get_by_role("status")).to_contain_text("Saved remote: 0 tool(s)")
    expect(page.get_by_label("Bearer token")).to_have_count(1)
    assert "tok-never-shown" not in page.content()
    listed = api_client(served.url, owner).get("/api/jarvis/mcp/servers").json()
    assert [s["name"] for s in listed["servers"]] == ["remote", "time"] and "tok-never-shown" not in str(listed)

    page.get_by_role("button", name="Remove MCP server time").click()
    expect(table.get_by_text("mcp__time__get_current_time")).to_have_count(0)
