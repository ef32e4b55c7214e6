"""Browser fixtures: one ``zerg serve`` subprocess per module on the session's test database with
the scripted model (:class:`tests.support.browser.Conductor`), one headless Chromium per session,
a fresh browser context per owner.

Every test that opens a page (``chromium``, ``open_page``) needs Playwright, /usr/bin/chromium and
the built app: with CI=true a missing one fails the test (with what to install), otherwise it skips."""

from __future__ import annotations

import contextlib

import pytest

from tests.support.browser import WAIT_MS, Conductor, ServedZerg, launch, require_browser


@pytest.fixture(scope="module")
def conductor():
    return Conductor()


@pytest.fixture(scope="module")
def scripted(conductor):
    from tests.support.llm_server import ScriptedLLM

    with contextlib.closing(ScriptedLLM()) as server:
        server.respond_with(conductor)
        yield server


@pytest.fixture(scope="module")
def served(database_url, scripted, tmp_path_factory, conductor):
    server = ServedZerg(database_url, scripted.base_url, tmp_path_factory.mktemp("zerg-serve"))
    yield server
    conductor.release()  # a held worker must not keep the server from stopping
    server.stop()


@pytest.fixture(autouse=True)
def _conductor_defaults(request):
    """Each test starts with the default script and an open gate; a held worker is freed after it."""
    if "conductor" not in request.fixturenames:
        yield
        return
    conductor = request.getfixturevalue("conductor")
    fresh = Conductor()
    conductor.tasks, conductor.answer, conductor.plain = fresh.tasks, fresh.answer, fresh.plain
    conductor.commands = fresh.commands
    conductor.release()
    yield
    conductor.release()


@pytest.fixture(scope="session")
def chromium():
    require_browser()
    from playwright.sync_api import sync_playwright

    pw = sync_playwright().start()
    browser = launch(pw)
    yield browser
    browser.close()
    pw.stop()


@pytest.fixture(scope="session", autouse=True)
def _generous_expectations():
    """Playwright's auto-waiting expectations wait on page state; their limit is a hang guard."""
    try:
        from playwright.sync_api import expect
    except ImportError:
        return
    expect.set_options(timeout=WAIT_MS)


@pytest.fixture
def new_owner(pool):
    """Create an owner (``NewOwner``, with its device secret) through the core library."""
    from tests.support.factories import unique_name
    from zerg.owners import create_owner

    def make(prefix: str = "web"):
        with pool.connection() as conn:
            return create_owner(conn, unique_name(prefix))

    return make


@pytest.fixture
def open_page(chromium, served):
    """``open_page(owner, **context_options)``: a page in a fresh context (1280x900 unless ``viewport`` says
    otherwise), signed in as ``owner``."""
    from tests.support.browser import sign_in

    contexts = []

    def make(owner=None, **options):
        options = {"viewport": {"width": 1280, "height": 900}} | options  # a test may ask for another size
        context = chromium.new_context(base_url=served.url, **options)
        context.set_default_timeout(WAIT_MS)
        contexts.append(context)
        page = context.new_page()
        if owner is not None:
            sign_in(page, owner)
        return page

    yield make
    for context in contexts:
        context.close()
