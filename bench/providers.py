"""What each provider's adapter adds to a model call (issue 28: at most 2 ms): the call through the
adapter and its real SDK (openai Chat Completions and Responses, anthropic, boto3 bedrock-runtime
with SigV4 signing) against the scripted server on loopback, which answers at once, minus a bare
``httpx`` round trip of the very bytes that SDK sent (headers included) to the same server. What is
left is ours and the SDK's: converting the messages and tools, building and signing the request,
parsing the answer, the retry wrapper. The server's own time is in both and cancels out.

The request is supervisor-sized: a 6 KB system prompt, a thread of 10 messages, a task, a turn with
two tool calls and their fenced results, 8 tool schemas; the answer is two parallel tool calls.

Run: .venv/bin/python -m bench.providers
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench._common import environ, fmt, script

ROOT = Path(__file__).resolve().parents[1]
PROVIDERS = {  # provider: (model, the settings that point it at the scripted server)
    "openai-chat": ("openai-chat:gpt-4o-mini", lambda s: {"OPENAI_BASE_URL": s.base_url}),
    "openai": ("openai:gpt-4o-mini", lambda s: {"OPENAI_API_KEY": "sk-bench", "OPENAI_BASE_URL": s.base_url}),
    "anthropic": ("anthropic:claude-haiku-4-5", lambda s: {"ANTHROPIC_API_KEY": "sk-bench", "ANTHROPIC_BASE_URL": s.root_url}),
    "bedrock": ("bedrock:amazon.nova-lite-v1:0", lambda s: {"ZERG_BEDROCK_REGION": "us-east-1",
                                                             "ZERG_BEDROCK_ENDPOINT_URL": s.root_url}),
}


def conversation() -> tuple[list[dict], list[dict]]:
    """(messages, tools) of a supervisor-sized request, fenced as the agent loop sends them."""
    from zerg.llm.untrusted import fence_messages

    tools = [{"type": "function", "function": {
        "name": f"tool_{i}", "description": "A tool of the supervisor. " * 8,
        "parameters": {"type": "object", "properties": {"task": {"type": "string"}, "limit": {"type": "integer"}},
                       "required": ["task"]}}} for i in range(8)]
    messages: list[dict] = [{"role": "system", "content": "You are Zerg's supervisor. " * 230}]
    for i in range(5):
        messages += [{"role": "user", "content": f"earlier task {i}: check the disks of the NAS " * 4},
                     {"role": "assistant", "content": f"earlier answer {i}: the NAS is 71% full " * 6}]
    messages.append({"role": "user", "content": "check disk and memory on cube"})
    messages.append({"role": "assistant", "content": None, "tool_calls": [
        {"id": f"call_{i}", "type": "function", "function": {"name": "tool_0", "arguments": f'{{"task": "t{i}"}}'}}
        for i in range(2)]})
    messages += [{"role": "tool", "tool_call_id": f"call_{i}", "content": "Worker job 1 finished: status success. " * 20}
                 for i in range(2)]
    return fence_messages(messages), tools


def paired(first, second, repeat: int) -> tuple[dict, dict, list[float]]:
    """``first`` and ``second`` in alternation, ``repeat`` pairs: each one's stats, and the difference of
    each pair (ms), so that a machine whose load drifts (2 shared cores) shifts both sides alike."""
    a, b = [], []
    for _ in range(repeat):
        for fn, samples in ((first, a), (second, b)):
            start = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - start) * 1000)
    differences = [x - y for x, y in zip(a, b)]

    def stats(samples: list[float]) -> dict:
        ordered = sorted(samples)
        return {"p50_ms": statistics.median(ordered), "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
                "mean_ms": statistics.fmean(ordered), "n": repeat}

    return stats(a), stats(b), differences


def main(smoke: bool = False) -> None:
    import httpx

    sys.path.insert(0, str(ROOT))  # tests.support: the scripted server the tests drive the providers with
    from tests.support.llm_server import ScriptedLLM
    from zerg.config import load_settings
    from zerg.llm.providers import ProviderRouter

    repeat = 20 if smoke else 500
    messages, tools = conversation()
    answer = {"tool_calls": [("tool_0", {"task": "Check disk usage on cube"}),
                             ("tool_0", {"task": "Check memory on cube"})]}
    server = ScriptedLLM().respond_with(lambda request: answer)
    overheads = {}
    print("== provider adapter overhead per model call (zero-latency loopback server, supervisor-sized request) ==")
    try:
        with tempfile.TemporaryDirectory() as tmp, httpx.Client() as bare, \
                environ(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench"):
            for provider, (model, env) in PROVIDERS.items():
                settings = load_settings({**env(server), "HOME": tmp, "ZERG_DATA_DIR": tmp,
                                          "PATH": os.environ.get("PATH", "")})
                router = ProviderRouter(settings)

                def call(router=router, model=model) -> None:
                    router.complete(messages, model=model, tools=tools)

                call()  # the SDK's client and connection made, its modules imported
                server.raw_requests.clear()
                call()
                sent = server.raw_requests[-1] if server.raw_requests else None
                if sent is None:  # Chat Completions: not kept raw by the server; its body is the request itself
                    url = f"{server.base_url}/chat/completions"
                    body, headers = server.requests[-1], {"authorization": "Bearer not-needed"}
                else:
                    url = f"{server.root_url}{sent['path']}"
                    body = sent["body"]
                    headers = {k: v for k, v in sent["headers"].items()
                               if k not in ("content-length", "host", "connection", "accept-encoding")}
                post = lambda url=url, body=body, headers=headers: bare.post(url, json=body, headers=headers)
                post().raise_for_status()
                through, direct, differences = paired(call, post, repeat)
                print(fmt(f"{provider}: through the adapter and its SDK", through))
                print(fmt(f"{provider}: the same bytes, bare httpx", direct))
                overheads[provider] = statistics.median(differences)
                print(f"{provider}: adapter overhead (median of pairs){'':<7} {overheads[provider]:8.3f} ms")
    finally:
        server.close()
    print(f"largest adapter overhead: {max(overheads.values()):.3f} ms (target <= 2 ms); "
          f"median across providers {statistics.median(overheads.values()):.3f} ms")


if __name__ == "__main__":
    script(main)
