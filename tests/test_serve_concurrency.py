"""``zerg serve`` answers requests concurrently, each with its own owner's data, and one owner
cannot take every handler thread.

Powertools keeps the request it is resolving in process-wide state; resolved in parallel threads,
one owner's request was answered with another owner's session (148 of 400 requests, 8 threads).
Then the server answered one request at a time, so one slow quick request (a model call of 10 s)
held every other owner's requests behind it (issue 25: a runs list took 29.1 s behind three).
The resolver now keeps the request per thread (``zerg.api.resolver``), and the server charges each
request to the owner its token names (``zerg.local.server.OWNER_SLOTS``).
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated

import httpx
import pytest
from aws_lambda_powertools.event_handler import Depends, Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Path, Query
from aws_lambda_powertools.event_handler.request import Request
from pydantic import BaseModel

from tests.support.api import http_login
from tests.support.factories import make_run, unique_name
from zerg.api.resolver import ConcurrentResolver
from zerg.local.server import OWNER_SLOTS, to_apigw_event
from zerg.owners import create_owner

CEILING_S = 60  # what any wait below may take at most, on a loaded machine; never a synchronisation
SLOW_ANSWER = "It is cold on Mars."


class HeldModel:
    """A scripted model whose answers wait until the test releases them: a slow model call whose
    end the test decides, so the tests assert orderings, not durations."""

    def __init__(self, llm) -> None:
        self.release = threading.Event()
        self._arrived = 0
        self._cond = threading.Condition()
        llm.respond_with(self._respond)

    def _respond(self, request: dict) -> dict:
        with self._cond:
            self._arrived += 1
            self._cond.notify_all()
        assert self.release.wait(CEILING_S), "the test never released the model"
        return {"content": SLOW_ANSWER}

    def wait_for(self, n: int) -> None:
        """Until ``n`` calls are inside the model (so their requests hold handler threads)."""
        with self._cond:
            assert self._cond.wait_for(lambda: self._arrived >= n, CEILING_S), f"{self._arrived} of {n} model calls"


@pytest.fixture
def served(api_server, llm):
    """(base url, held model) of a server whose quick answers wait for the test."""
    base, configure = api_server
    configure(ZERG_EMBEDDINGS="off", ZERG_QUICK_TIMEOUT_S="120")
    model = HeldModel(llm)
    yield base, model
    model.release.set()  # a failed test must not leave the server's threads waiting


def _quick(client: httpx.Client, finished: list, lock: threading.Lock) -> httpx.Response:
    resp = client.post("/api/jarvis/quick", json={"utterance": "How cold does it get on Mars at night?"})
    with lock:
        finished.append("slow")
    return resp


def test_another_owners_runs_list_answers_while_three_quick_requests_wait_on_the_model(served, pool, alice, bob):
    base, model = served
    a, b = http_login(base, alice), http_login(base, bob)
    answers: list[str] = []  # in the order the answers arrived
    lock = threading.Lock()
    with ThreadPoolExecutor(max_workers=3) as slow:
        pending = [slow.submit(_quick, a, answers, lock) for _ in range(3)]
        model.wait_for(3)  # all three are in their handlers, waiting on the model
        listed = b.get("/api/jarvis/runs")
        with lock:
            answers.append("bob")
        model.release.set()  # only now can any slow one finish
        quick = [p.result(CEILING_S) for p in pending]
    assert listed.status_code == 200 and listed.json()["runs"] == [], listed.text
    assert answers == ["bob", "slow", "slow", "slow"]
    assert [(r.status_code, r.json()["answer"]) for r in quick] == [(200, SLOW_ANSWER)] * 3


def test_past_its_slots_an_owner_gets_429_with_retry_after_while_another_owner_is_served(served, pool, alice, bob):
    base, model = served
    a, b = http_login(base, alice), http_login(base, bob)
    answers: list[str] = []
    lock = threading.Lock()
    with ThreadPoolExecutor(max_workers=OWNER_SLOTS) as slow:
        pending = [slow.submit(_quick, a, answers, lock) for _ in range(OWNER_SLOTS)]
        model.wait_for(OWNER_SLOTS)  # every one of alice's slots is taken
        refused = a.get("/api/jarvis/runs")  # after waiting OWNER_WAIT_S for a slot that never came free
        served_bob = b.get("/api/jarvis/runs")
        # A request is charged to the owner its token's signature names: none here, so not alice's.
        anonymous = httpx.get(f"{base}/api/jarvis/runs", headers={"Authorization": "Bearer not-a-token"})
        model.release.set()
        quick = [p.result(CEILING_S) for p in pending]
    assert refused.status_code == 429 and refused.headers["retry-after"] == "1", refused.text
    assert refused.headers["content-type"] == "application/json"
    assert refused.json() == {"error": "too_many_requests", "message": f"this owner already has {OWNER_SLOTS} "
                              "requests in progress; retry when one has ended"}
    assert served_bob.status_code == 200, served_bob.text
    assert anonymous.status_code == 401 and anonymous.json()["error"] == "unauthorized"
    assert [r.status_code for r in quick] == [200] * OWNER_SLOTS
    assert a.get("/api/jarvis/runs").status_code == 200  # the slots are given back


def test_concurrent_requests_of_two_owners_each_get_their_own_session_and_arguments(api_server, pool):
    base, _ = api_server
    with pool.connection() as conn:
        owners = [create_owner(conn, unique_name(name)) for name in ("alice", "bob")]
    runs = [[make_run(pool, o.owner_id, f"{o.owner_id} task {i}")[0] for i in range(3)] for o in owners]
    clients = [http_login(base, owners[0]), http_login(base, owners[1])]
    # bob by the session cookie, alice by the bearer token: both ways of naming the session
    token = clients[1].headers.pop("Authorization").removeprefix("Bearer ")
    clients[1].cookies.clear()  # the Secure one the server set, never sent over plain HTTP anyway
    clients[1].headers["Cookie"] = f"zerg_session={token}"

    def ask(i: int) -> str | None:
        """None when the answer is the caller's own, else what was wrong."""
        me, other = i % 2, 1 - i % 2
        client, kind = clients[me], (i // 2) % 4
        if kind == 0:
            resp = client.get("/api/jarvis/sessions")
            ok = resp.status_code == 200 and {d["device_id"] for d in resp.json()["devices"]} == {owners[me].device_id}
        elif kind == 1:  # a path argument
            run_id = runs[me][i % 3]
            resp = client.get(f"/api/jarvis/runs/{run_id}")
            ok = resp.status_code == 200 and resp.json()["run_id"] == run_id
        elif kind == 2:  # another owner's path argument
            resp = client.get(f"/api/jarvis/runs/{runs[other][i % 3]}")
            ok = resp.status_code == 404
        else:  # a query argument: each owner asks for a page size of its own
            resp = client.get("/api/jarvis/runs", params={"limit": me + 1})
            ok = resp.status_code == 200 and [r["id"] for r in resp.json()["runs"]] == sorted(runs[me])[::-1][:me + 1]
        return None if ok else f"request {i} (owner {me}, kind {kind}): {resp.status_code} {resp.text[:200]}"

    with ThreadPoolExecutor(max_workers=8) as workers:
        wrong = [w for w in workers.map(ask, range(400)) if w is not None]
    assert wrong == [], f"{len(wrong)} of 400 answered with another request's data or failed: {wrong[:3]}"


# --- the resolver itself: a request paused in its route, another resolved meanwhile ----------

def _caller(request: Request) -> str:
    """A dependency, as the API's own (``zerg.api.deps.owner``) read the request (annotations
    resolve in the module's globals, so it lives here)."""
    return request.resolved_event.headers["x-caller"]


def _paused_app(inside: threading.Event, go_on: threading.Event) -> ConcurrentResolver:
    router = Router()

    @router.get("/things/<name>")
    def thing(name: Annotated[str, Path()], who: Annotated[str, Depends(_caller)],
              page: Annotated[int, Query()] = 1):
        if name == "paused":
            inside.set()
            assert go_on.wait(CEILING_S)
        seen = {"name": name, "who": who, "page": page, "path": router.current_event.path,
                "route_args": router.context.get("_route_args"), "header": router.current_event.headers["x-caller"]}
        return Response(200, "application/json", json.dumps(seen))

    app = ConcurrentResolver(enable_validation=True)
    app.include_router(router)
    app.prepare()
    return app


def test_a_request_paused_in_its_route_keeps_its_event_arguments_and_dependencies_while_another_resolves():
    inside, go_on = threading.Event(), threading.Event()
    app = _paused_app(inside, go_on)
    paused: dict = {}

    def first() -> None:
        event = to_apigw_event("GET", "/things/paused?page=1", {"x-caller": "alice"}, b"")
        paused.update(app.resolve(event, None))

    thread = threading.Thread(target=first)
    thread.start()
    assert inside.wait(CEILING_S)
    other = app.resolve(to_apigw_event("GET", "/things/other?page=2", {"x-caller": "bob"}, b""), None)
    go_on.set()
    thread.join(CEILING_S)
    assert json.loads(other["body"]) == {"name": "other", "who": "bob", "page": 2, "path": "/things/other",
                                         "route_args": {"name": "other", "page": 2, "who": "bob"}, "header": "bob"}
    assert json.loads(paused["body"]) == {"name": "paused", "who": "alice", "page": 1, "path": "/things/paused",
                                          "route_args": {"name": "paused", "page": 1, "who": "alice"},
                                          "header": "alice"}
    assert app.current_event is None and app.context == {}  # nothing of a request outlives it


class _Body(BaseModel):
    text: str
    count: int = 1


def test_a_prepared_resolver_builds_its_openapi_document_in_four_threads_at_once():
    """Unprepared, each thread built its own models of a route and looked up another's: a KeyError
    in 11 to 17 of 20 trials."""
    for _ in range(10):
        router = Router()
        for i in range(20):
            def post_thing(thing_id: Annotated[int, Path()], body: _Body, page: Annotated[int, Query()] = 1):
                return {}
            post_thing.__name__ = f"post_thing_{i}"
            router.post(f"/things{i}/<thing_id>")(post_thing)
        app = ConcurrentResolver(enable_validation=True)
        app.include_router(router)
        app.prepare()
        together = threading.Barrier(4)

        def document(_: int, app: ConcurrentResolver = app, together: threading.Barrier = together) -> str:
            together.wait(CEILING_S)
            return app.get_openapi_json_schema()

        with ThreadPoolExecutor(max_workers=4) as threads:
            documents = set(threads.map(document, range(4)))
        assert documents == {app.get_openapi_json_schema()}


def test_two_requests_asking_for_a_runtime_part_at_once_build_it_once():
    from zerg.config import load_settings
    from zerg.runtime import Runtime

    builds: list[str] = []
    entered, release = threading.Event(), threading.Event()

    def slow_starter(rt: Runtime) -> object:  # the first build is still running when the second asks
        builds.append(threading.current_thread().name)
        entered.set()
        assert release.wait(CEILING_S)
        return object()

    rt = Runtime(load_settings({}), {"starter": slow_starter})
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(lambda: rt.starter)
        assert entered.wait(CEILING_S)
        second = pool.submit(lambda: rt.starter)
        release.set()
        assert first.result(CEILING_S) is second.result(CEILING_S)
    assert len(builds) == 1  # one local engine, not two
