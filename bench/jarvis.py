"""Jarvis's fast paths against the seed's latency budget (8.1), through the API handler (the Lambda
path: auth check, validation, the route):

- ``POST /api/jarvis/route`` decided by the rules (intent detection < 500 ms): no model call, one
  owner-scoped read;
- ``POST /api/jarvis/quick`` answered by the clock (no model) and by the scripted model on loopback
  (quick mode < 2 s): the thread read, one model call, the turn stored;
- the rules alone on hostile 4,000-character inputs (no catastrophic backtracking).

Run: .venv/bin/python -m bench.jarvis
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from collections.abc import Callable

from bench._common import bench_database, environ, script

INTENT_BUDGET_MS = 500
QUICK_BUDGET_MS = 2000
UTTERANCES = ("what time is it?", "check my server health", "tell me a joke", "why did the backup fail",
              "what is 2 + 2", "restart nginx and then check the logs", "what do you remember about cube")


def percentiles(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return statistics.median(samples), samples[min(len(samples) - 1, round(0.95 * (len(samples) - 1)))]


def line(name: str, p50: float, p95: float, n: int, budget_ms: float) -> str:
    verdict = "within" if p95 <= budget_ms else "OVER"
    return f"{name:<46} p50 {p50:8.2f} ms   p95 {p95:8.2f} ms   (n={n}; budget {budget_ms:g} ms: {verdict})"


def main(smoke: bool = False) -> None:
    from functions.events.handler import handler
    from tests.support.llm_server import ScriptedLLM
    from zerg.jarvis import intent
    from zerg.local.server import to_apigw_event
    from zerg.owners import create_owner
    from zerg.wiring import get_runtime

    repeat, warmup = (5, 1) if smoke else (200, 10)
    llm = ScriptedLLM()
    llm.respond_with(lambda request: {"content": "Mount Everest is 8,849 m tall."})
    try:
        with tempfile.TemporaryDirectory() as tmp, bench_database() as url, \
                environ(DATABASE_URL=url, OPENAI_BASE_URL=llm.base_url, ZERG_DATA_DIR=tmp, ZERG_EMBEDDINGS="off"):
            rt = get_runtime()
            with rt.pool.connection() as conn:
                owner = create_owner(conn, "bench-jarvis")

            def post(path: str, body: dict, token: str | None = None) -> dict:
                headers = {"content-type": "application/json"} | ({"authorization": f"Bearer {token}"} if token else {})
                result = handler(to_apigw_event("POST", path, headers, json.dumps(body).encode()), None)
                assert result["statusCode"] == 200, result
                return json.loads(result["body"])

            token = post("/api/jarvis/auth", {"device_secret": owner.device_secret})["token"]
            said = iter(UTTERANCES * (repeat + warmup))

            def route() -> None:
                assert post("/api/jarvis/route", {"utterance": next(said)}, token)["decided_by"] == "rules"

            for _ in range(warmup):
                route()
            print("== Jarvis fast paths, through the API handler ==")
            print(line("POST /api/jarvis/route (rules, no model)", *percentiles(route, repeat), repeat, INTENT_BUDGET_MS))
            assert llm.requests == []  # the pre-check never asked the model

            def clock() -> None:
                post("/api/jarvis/quick", {"utterance": "what time is it?"}, token)

            def model() -> None:
                post("/api/jarvis/quick", {"utterance": "how tall is mount everest"}, token)

            for _ in range(warmup):
                clock(), model()
            print(line("POST /api/jarvis/quick (clock, no model)", *percentiles(clock, repeat), repeat, QUICK_BUDGET_MS))
            print(line("POST /api/jarvis/quick (scripted model)", *percentiles(model, repeat), repeat, QUICK_BUDGET_MS))

            hostile = ("1 " * 1999 + "x", "hi" * 2000 + "x", "what is " + "a " * 1990, "(" * 3999 + "1")
            worst = max(percentiles(lambda text=text: intent.precheck(text, running=True), repeat)[1] for text in hostile)
            print(f"{'rules alone, hostile 4,000-char inputs (worst p95)':<46} {worst:8.3f} ms")
    finally:
        llm.close()


if __name__ == "__main__":
    script(main)
