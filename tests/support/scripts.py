"""Scripted model behaviour for whole runs: one responder that plays supervisor, workers and
summaries, telling them apart by the tools each request offers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def memory_call(request: dict[str, Any]) -> str | None:
    """"episode", "facts" or "compaction" for the post-run memory calls (by their system prompts), else None."""
    first = (request.get("messages") or [{}])[0]
    text = (first.get("content") or "") if first.get("role") == "system" else ""
    if text.startswith("You write the episodic memory"):
        return "episode"
    if text.startswith("You keep Zerg's long-term memory"):
        return "facts"
    if text.startswith("You compact the oldest part"):
        return "compaction"
    return None


def role_of(request: dict[str, Any]) -> str:
    if memory_call(request):
        return "memory"
    if request.get("tool_choice") == "none":
        return "supervisor-final"
    names = {t["function"]["name"] for t in request.get("tools") or []}
    if "spawn_worker" in names:
        return "supervisor"
    if "container_exec" in names:
        return "worker"
    return "supervisor-final" if any(m["role"] == "tool" for m in request["messages"]) else "summary"


def worker_task(request: dict[str, Any]) -> str:
    return next(m["content"] for m in request["messages"] if m["role"] == "user")


def has_tool_results(request: dict[str, Any]) -> bool:
    return any(m["role"] == "tool" for m in request["messages"])


def run_script(
    tasks: list[str],
    answer: Callable[[dict[str, Any]], str] = lambda req: "Both checks are fine.",
    commands: dict[str, str] | None = None,
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Supervisor spawns ``tasks`` then answers; each worker runs one command then reports."""
    commands = commands or {}

    def respond(request: dict[str, Any]) -> dict[str, Any]:
        role = role_of(request)
        if role == "supervisor":
            if has_tool_results(request):
                return {"content": answer(request)}
            return {"tool_calls": [("spawn_worker", {"task": t}) for t in tasks]}
        if role == "worker":
            task = worker_task(request)
            if has_tool_results(request):
                return {"content": f"Finished: {task}"}
            return {"tool_calls": [("container_exec", {"command": commands.get(task, f"echo evidence for {task!r}")})]}
        if role == "summary":
            return {"content": "short summary"}
        return {"content": answer(request)}

    return respond


def assessment_json(severity: str = "info", headline: str = "All checks passed", details: str = "Nothing to report.") -> str:
    """A background run's final answer: the assessment object, as the supervisor must write it."""
    import json

    return json.dumps({"severity": severity, "headline": headline, "details": details})


def background_script(
    tasks: list[str],
    severity: str = "info",
    headline: str = "All checks passed",
    details: str = "Nothing to report.",
    *,
    answer: str | None = None,
    commands: dict[str, str] | None = None,
    failing: tuple[str, ...] = (),
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A scheduled run's supervisor: spawns ``tasks``, then answers with the assessment (or the raw
    ``answer`` text, e.g. an invalid one). The workers of ``failing`` tasks get a model error, so
    their jobs end ``failed``."""
    final = answer if answer is not None else assessment_json(severity, headline, details)
    inner = run_script(tasks, answer=lambda req: final, commands=commands)

    def respond(request: dict[str, Any]) -> dict[str, Any]:
        if role_of(request) == "worker" and worker_task(request) in failing:
            return {"status": 400, "message": "scripted worker failure"}
        return inner(request)

    return respond
