"""``zerg serve`` answers concurrent requests of different owners each with its own owner's data.

Powertools keeps the request it is resolving in process-wide state; resolved in parallel threads,
one owner's request was answered with another owner's session (148 of 400 requests, 8 threads).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx

from tests.support.factories import unique_name
from zerg.owners import create_owner


def test_concurrent_requests_of_two_owners_each_get_their_own_data(api_server, pool):
    base, _ = api_server
    with pool.connection() as conn:
        owners = [create_owner(conn, unique_name(name)) for name in ("alice", "bob")]
    clients = []
    for owner in owners:
        client = httpx.Client(base_url=base, timeout=30)
        token = client.post("/api/jarvis/auth", json={"device_secret": owner.device_secret}).json()["token"]
        client.headers["Authorization"] = f"Bearer {token}"
        clients.append((owner, client))

    def ask(i: int) -> tuple[int, int, set[int]]:
        owner, client = clients[i % 2]
        resp = client.get("/api/jarvis/sessions")
        return resp.status_code, owner.device_id, {d["device_id"] for d in resp.json().get("devices", [])}

    with ThreadPoolExecutor(max_workers=8) as workers:
        answers = list(workers.map(ask, range(200)))

    wrong = [a for a in answers if a[0] != 200 or a[2] != {a[1]}]
    assert wrong == [], f"{len(wrong)} of {len(answers)} answered with another owner's data or failed"
