"""The offline provider: a deterministic ChatModel used when no model is configured.

With neither ``OPENAI_API_KEY`` nor ``OPENAI_BASE_URL`` the main job still runs end to end:

- as **supervisor** it splits the task into worker tasks by the playbook topics it names (and the
  allowlisted SSH hosts it mentions), spawns them, and after resume writes a synthesis that cites
  every worker by job id;
- as **worker** it maps its task to the playbook command for the topic and runs it with
  ``container_exec`` (or ``ssh_exec`` when the task names an allowlisted host), then reports the
  command output verbatim;
- as **summariser** it is extractive (the first informative line of the result);
- in **background mode** (a run started by a schedule) its final answer is the assessment object
  ``{"severity", "headline", "details"}``: ``info`` when every worker succeeded, ``warning``
  otherwise, the synthesis as details; so ``zerg schedules run-now`` works with no model.

It says plainly that it is the offline planner. The playbook (commands are ordinary shell):

| topic     | words in the task                         | command |
|-----------|-------------------------------------------|---------|
| disk      | disk, storage, space, df, filesystem      | ``df -h`` |
| memory    | memory, ram, mem, swap                    | ``free -m`` |
| load      | load, uptime, cpu                         | ``uptime; cat /proc/loadavg`` |
| processes | process, processes, ps, top               | ``ps aux --sort=-%cpu | head -15`` |
| docker    | docker, container, containers             | ``docker ps`` |
| ports     | port, ports, listening, socket            | ``ss -tlnp`` |
| logs      | log, logs, journal, error, errors         | ``journalctl -p err -n 30`` (or syslog) |

A task naming no topic gets disk, memory and load ("a health check").
"""

from __future__ import annotations

import json
import re
from typing import Any

from zerg.llm.port import BACKGROUND_MARKER, ChatResult, ToolCall, Usage
from zerg.llm.untrusted import fenced_parts, unwrap

OFFLINE_NOTE = "(Offline planner: no model is configured, so Zerg ran its documented playbook.)"

PLAYBOOK: dict[str, tuple[tuple[str, ...], str, str]] = {
    # topic: (trigger words, worker task wording, command)
    "disk": (("disk", "disks", "storage", "space", "df", "filesystem"), "Check disk usage",
             "df -h -x tmpfs -x devtmpfs 2>/dev/null || df -h"),
    "memory": (("memory", "ram", "mem", "swap"), "Check memory usage",
               "free -m 2>/dev/null || head -5 /proc/meminfo"),
    "load": (("load", "uptime", "cpu"), "Check load and uptime", "uptime; cat /proc/loadavg"),
    "processes": (("process", "processes", "ps", "top"), "List the top processes",
                  "ps aux --sort=-%cpu 2>/dev/null | head -15 || ps | head -15"),
    "docker": (("docker", "container", "containers"), "List running docker containers",
               "docker ps --format 'table {{.Names}}\\t{{.Status}}\\t{{.Image}}' 2>&1"),
    "ports": (("port", "ports", "listening", "socket", "sockets"), "List listening ports",
              "ss -tlnp 2>/dev/null || netstat -tln 2>/dev/null || cat /proc/net/tcp | head -20"),
    "logs": (("log", "logs", "journal", "error", "errors"), "Show recent error logs",
             "journalctl -p err -n 30 --no-pager 2>&1 || tail -n 30 /var/log/syslog 2>&1"),
}
DEFAULT_TOPICS = ("disk", "memory", "load")
LOCAL = "this machine"
SAVED_PREFIX = "[Zerg] Saved to the owner's memory"  # zerg.memory.notes.saved_line


def topics_in(text: str) -> list[str]:
    words = set(re.findall(r"[a-z]+", text.lower()))
    return [topic for topic, (triggers, _, _) in PLAYBOOK.items() if words & set(triggers)]


def hosts_in(text: str, known: list[str]) -> list[str]:
    words = set(re.findall(r"[A-Za-z0-9_.-]+", text))
    return [h for h in known if h in words]


def _tokens(messages: list[dict[str, Any]], reply: str) -> Usage:
    return Usage(len(json.dumps(messages, default=str)) // 4, max(1, len(reply) // 4), 0.0)


class OfflineChatModel:
    """Deterministic stand-in behind the same port as the OpenAI provider."""

    def __init__(self, ssh_hosts: list[str] | None = None) -> None:
        self.ssh_hosts = sorted(ssh_hosts or [])
        self._ids = 0

    def _call(self, name: str, args: dict[str, Any]) -> ToolCall:
        self._ids += 1
        return ToolCall(id=f"offline_{self._ids}", name=name, arguments=json.dumps(args))

    def complete(self, messages, *, model, tools=None, max_tokens=None, temperature=None, timeout=None,
                 tool_choice=None, tag=None, stream=None) -> ChatResult:
        names = set() if tool_choice == "none" else {t["function"]["name"] for t in tools or []}
        if "spawn_worker" in names or any(m["role"] == "tool" for m in messages) and "container_exec" not in names:
            content, calls = self._supervise(messages, "spawn_worker" in names)
        elif "container_exec" in names:
            content, calls = self._work(messages)
        else:
            content, calls = self._summarise(messages), []
        if stream is not None and content and not calls:  # written at once, handed over a line at a time
            for line in content.splitlines(keepends=True):
                stream.text(line)
        return ChatResult(model="offline", content=content, tool_calls=calls, usage=_tokens(messages, content))

    # --- supervisor ------------------------------------------------------------------------
    def _supervise(self, messages, can_spawn: bool) -> tuple[str, list[ToolCall]]:
        # The last user message that is not fenced data (the evidence mount is a fenced user message).
        said = [m["content"] for m in messages if m["role"] == "user" and unwrap(m["content"]) == m["content"]]
        task = said[-1]
        saved = task.startswith(SAVED_PREFIX) and len(said) > 1  # Zerg's line after a "remember that" task
        if saved:
            task = said[-2]
        outcomes = [unwrap(m["content"]) for m in messages if m["role"] == "tool" and m.get("content")]
        if saved and not outcomes and not topics_in(_without_notes(task)):  # only something to remember
            return f"{OFFLINE_NOTE}\n\nNoted: {said[-1].removeprefix('[Zerg] ').split(', as the user asked')[0]}.", []
        if not outcomes and can_spawn:
            topics = topics_in(task) or list(DEFAULT_TOPICS)
            targets = hosts_in(task, self.ssh_hosts) or [LOCAL]
            calls = [self._call("spawn_worker", {"task": f"{PLAYBOOK[t][1]} on {where}"})
                     for where in targets for t in topics]
            return "", calls
        lines = [OFFLINE_NOTE, "", f"Results for: {task}"]
        statuses = []
        for outcome in outcomes:
            head = outcome.splitlines()[0]  # "Worker job N finished: status S in Xs."
            job = re.search(r"job (\d+)", head)
            status = re.search(r"status (\w+)", head)
            statuses.append(status.group(1) if status else "?")
            summary = next((line[len("Summary: "):] for line in outcome.splitlines() if line.startswith("Summary: ")), "")
            body = summary or _first_informative(outcome.split("\n", 1)[-1])
            lines.append(f"- worker #{job.group(1) if job else '?'} ({statuses[-1]}): {body}")
        lines += ["", "Full outputs: read_worker_result(job_id); raw command output is in each worker's tool_calls/."]
        if _background(messages):
            return _assessment(statuses, "\n".join(lines)), []
        return "\n".join(lines), []

    # --- worker ----------------------------------------------------------------------------
    def _work(self, messages) -> tuple[str, list[ToolCall]]:
        task = next(m["content"] for m in messages if m["role"] == "user")
        results = [m for m in messages if m["role"] == "tool"]
        topic = (topics_in(task) or ["load"])[0]
        host = (hosts_in(task, self.ssh_hosts) or [None])[0]
        command = PLAYBOOK[topic][2]
        if not results:
            if host:
                return "", [self._call("ssh_exec", {"host": host, "command": command})]
            return "", [self._call("container_exec", {"command": command})]
        output = unwrap(results[-1]["content"] or "")
        stdout = output.split("--- stdout ---", 1)[-1].split("--- stderr ---", 1)[0].strip()
        exit_line = next((line for line in output.splitlines() if line.startswith("exit_code:")), "exit_code: ?")
        label = PLAYBOOK[topic][1].removeprefix("Check ").removeprefix("List the ").removeprefix("List ")
        head = f"{label[0].upper()}{label[1:]} on {host or LOCAL} (exit {exit_line.split(':', 1)[1].strip()}):"
        return f"{head}\n{stdout[:1500] or '(no output)'}\n(command: `{command}`)", []

    # --- summary ---------------------------------------------------------------------------
    def _summarise(self, messages) -> str:
        prompt = messages[-1]["content"]
        result = (fenced_parts(prompt) or [prompt])[0]
        return _first_informative(result)[:150]


def _background(messages) -> bool:
    """An unattended run (started by a schedule): its system prompt carries the background rules."""
    first = messages[0] if messages else {}
    return first.get("role") == "system" and BACKGROUND_MARKER in (first.get("content") or "")


def _assessment(statuses: list[str], details: str) -> str:
    """The background answer: the assessment object, ``info`` when every worker succeeded."""
    failed = [s for s in statuses if s != "success"]
    if failed:
        severity, headline = "warning", f"Offline check: {len(failed)} of {len(statuses)} worker(s) did not succeed"
    else:
        severity, headline = "info", f"Offline check: all {len(statuses)} worker(s) succeeded"
    return json.dumps({"severity": severity, "headline": headline, "details": details})


def _without_notes(task: str) -> str:
    """The task without its "remember that ..." sentences (those are saved, not worked on)."""
    from zerg.memory.notes import explicit_notes

    for sentence, _ in explicit_notes(task):
        task = task.replace(sentence, " ")
    return task


def _first_informative(text: str) -> str:
    """The head line plus the first output line with a number in it (else the first output line)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return "(no output)"
    body = [line for line in lines[1:] if not line.startswith("(command:")]
    pick = next((line for line in body if re.search(r"\d", line)), body[0] if body else "")
    return (f"{lines[0].rstrip('.:')}: {pick}" if pick else lines[0])[:150]
