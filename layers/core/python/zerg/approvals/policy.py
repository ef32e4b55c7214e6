"""The owner's approval policy and the decision made from it before a tool runs (pure: no I/O).

:func:`decide` answers, for one validated tool call, ``allow``, ``ask`` or ``deny`` with the
reason, from the owner's :class:`Policy`, the call's arguments, and who started the run.

Invariants:
- Only the tools in :data:`GOVERNED` and the owner's MCP tools (``mcp__<server>__<tool>``) are decided;
  an MCP tool's default is ``ask``, ``allow`` when its server marks it read-only. Every other tool (reading memory, the clock,
  ``http_request`` with GET or HEAD...) is allowed without a policy lookup.
- ``deny`` always wins; an ssh command the host's allowlist names runs without asking unless the
  tool is denied (:mod:`zerg.approvals.commands` decides what a command is).
- By trigger: a run nobody started in person (a schedule, an email or SMS reply, or a trigger
  this module does not know) asks at least, for anything outside the allowlists, whatever the
  policy allows. The exceptions are the :data:`CONTAINED` tools, whose ``allow`` holds for every
  run because code already bounds what they can do: ``container_exec`` runs in a sandbox of its
  own, and the directive tools only reach a person's run and ask the owner themselves before
  anything only the owner decides (:mod:`zerg.tools.directive_tools`).
- The policy is data the owner set through the API or the CLI, validated here
  (:class:`Policy`); no tool and no model output can change it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from zerg.approvals.commands import DEFAULT_RULES, allowed_by, pattern_problem

Mode = Literal["allow", "ask", "deny"]

DIRECTIVE_TOOLS = ("update_schedule", "create_schedule", "delete_schedule", "set_preference", "create_reminder")
# Each governed tool and its mode when the owner set none.
DEFAULT_MODES: dict[str, Mode] = {
    "ssh_exec": "ask",  # the host's allowlist runs without asking
    "container_exec": "allow",  # sandboxed (see CONTAINED)
    "http_request": "ask",  # only methods other than GET and HEAD are governed
    "send_email": "ask",
    "send_sms": "ask",
    **{name: "allow" for name in DIRECTIVE_TOOLS},  # they ask the owner themselves where it matters
}
GOVERNED = frozenset(DEFAULT_MODES)
# An owner's MCP server's tool (issue 30, zerg.mcp_servers): governed too, by its full name. Its default
# is ``ask``, or ``allow`` when the server marks it read-only (readOnlyHint); the owner decides per tool.
MCP_PREFIX = "mcp__"
MCP_TOOL_PATTERN = r"^mcp__[a-z0-9][a-z0-9-]{0,23}__[A-Za-z0-9_-]+$"
_MCP_TOOL = re.compile(MCP_TOOL_PATTERN)
MCP_POLICY_MAX = 500  # per-tool modes an owner may set for MCP tools
CONTAINED = frozenset({"container_exec", *DIRECTIVE_TOOLS})
PERSON_TRIGGERS = frozenset({"api", "cli"})  # the web client's runs are ``api``
ANY_HOST = "*"
EXPIRY_DEFAULT_S, EXPIRY_MIN_S, EXPIRY_MAX_S = 3_600, 60, 86_400
# A run's execution waits at most ~25 h (the ASL's TimeoutSeconds); a run that asks again and again is
# more likely a loop (or text steering it) than work the owner wants to answer call by call.
ASKS_PER_RUN_DEFAULT, ASKS_PER_RUN_MAX = 10, 50
HOSTS_MAX, PATTERNS_MAX = 100, 100


class Policy(BaseModel):
    """What an owner set; anything left out is the default."""

    model_config = ConfigDict(extra="forbid")
    tools: dict[str, Mode] = Field(default_factory=dict, description="Tool name -> allow, ask or deny",
                                   # the schema names the governed tools (the validator below says which, by name)
                                   json_schema_extra={"propertyNames": {"anyOf": [
                                       {"enum": sorted(DEFAULT_MODES)},
                                       {"type": "string", "pattern": MCP_TOOL_PATTERN, "maxLength": 64}]}})
    ssh_allow: dict[str, list[str]] = Field(
        default_factory=dict, description="SSH host alias (or '*' for every host) -> command patterns that run "
                                          "without asking",
        # what the validator below checks, as named formats (zerg.api.docs.FORMATS)
        json_schema_extra={"propertyNames": {"format": "ssh-allow-host"}, "maxProperties": HOSTS_MAX,
                           "additionalProperties": {"type": "array", "maxItems": PATTERNS_MAX,
                                                    "items": {"type": "string", "format": "ssh-command-pattern"}}})
    builtin_allowlist: bool = Field(default=True, description="The built-in read-only commands (df, free, ...) "
                                                              "run without asking on every host")
    expiry_s: int = Field(default=EXPIRY_DEFAULT_S, ge=EXPIRY_MIN_S, le=EXPIRY_MAX_S,
                          description="Seconds an approval request waits for the owner's answer")
    max_asks_per_run: int = Field(default=ASKS_PER_RUN_DEFAULT, ge=1, le=ASKS_PER_RUN_MAX,
                                  description="Approvals one run may ask for; past it, a call that would ask is "
                                              "refused without asking")

    @field_validator("tools")
    @classmethod
    def _known_tools(cls, value: dict[str, Mode]) -> dict[str, Mode]:
        unknown = sorted(t for t in set(value) - GOVERNED if not is_mcp_tool(t))
        if unknown:
            raise ValueError(f"unknown tool(s) {', '.join(t[:80] for t in unknown[:10])}; governed tools: "
                             f"{', '.join(sorted(GOVERNED))}, and an MCP server's tool as mcp__<server>__<tool>")
        if sum(1 for t in value if t.startswith(MCP_PREFIX)) > MCP_POLICY_MAX:
            raise ValueError(f"at most {MCP_POLICY_MAX} MCP tools")
        return value

    @field_validator("ssh_allow")
    @classmethod
    def _patterns(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        if len(value) > HOSTS_MAX:
            raise ValueError(f"at most {HOSTS_MAX} hosts")
        for host, patterns in value.items():
            if not (host == ANY_HOST or (0 < len(host) <= 100 and host.strip() == host)):
                raise ValueError(f"host {host[:100]!r}: an alias of 1 to 100 characters, or '*'")
            if len(patterns) > PATTERNS_MAX:
                raise ValueError(f"host {host!r}: at most {PATTERNS_MAX} patterns")
            for pattern in patterns:
                problem = pattern_problem(pattern)
                if problem:
                    raise ValueError(f"host {host!r}: pattern {pattern[:PATTERNS_MAX]!r} {problem}")
        return value

    def mode(self, tool: str, read_only: bool = False) -> Mode:
        if tool.startswith(MCP_PREFIX):
            return self.tools.get(tool, "allow" if read_only else "ask")
        return self.tools.get(tool, DEFAULT_MODES[tool])

    def patterns(self, host: str | None) -> list[str]:
        return [*self.ssh_allow.get(ANY_HOST, ()), *(self.ssh_allow.get(host, ()) if host else ())]


@dataclass(frozen=True)
class Decision:
    outcome: Mode
    reason: str


def is_mcp_tool(tool: str) -> bool:
    return len(tool) <= 64 and _MCP_TOOL.fullmatch(tool) is not None


def decide(policy: Policy, tool: str, args: dict[str, Any], host: str | None, trigger: str | None,
           read_only: bool = False) -> Decision:
    """Whether this call runs now (``allow``), waits for the owner (``ask``) or never runs (``deny``).
    ``read_only``: an MCP tool its server marks read-only (its default is then ``allow``)."""
    if is_mcp_tool(tool):
        if tool not in policy.tools and read_only:
            return Decision("allow", f"{tool} is marked read-only by its server (the owner set no mode for it)")
    elif tool not in GOVERNED:
        return Decision("allow", f"{tool} is not governed by the approval policy")
    if tool == "http_request" and str(args.get("method", "GET")).upper() in ("GET", "HEAD"):
        return Decision("allow", "http_request GET and HEAD are not governed")
    mode = policy.mode(tool, read_only)
    if mode == "deny":
        return Decision("deny", f"{tool} is set to deny")
    if tool == "ssh_exec":
        rules = DEFAULT_RULES if policy.builtin_allowlist else ()
        by = allowed_by(str(args.get("command", "")), policy.patterns(host), rules)
        if by is not None:
            return Decision("allow", f"allowlisted ({by})")
    if trigger not in PERSON_TRIGGERS and tool not in CONTAINED and mode == "allow":
        return Decision("ask", f"a run started by {trigger or 'an unknown trigger'} asks before {tool} outside the "
                               "allowlists, whatever the policy allows")
    if mode == "ask":
        return Decision("ask", f"the owner's policy asks before {tool}"
                               + (" (the command is not on the host's allowlist)" if tool == "ssh_exec" else ""))
    return Decision("allow", f"the owner's policy allows {tool}")


@dataclass(frozen=True)
class ApprovalNeeded:
    """A call the owner's policy asks about: what it is, why it asks, and how long an answer may
    take. A worker's call becomes a pending approval the owner answers (:mod:`zerg.approvals.wait`);
    the supervisor cannot wait within its turn, so its call does not run and the model reads
    :meth:`text`."""

    tool: str
    arguments: dict[str, Any]
    host: str | None
    reason: str
    trigger: str | None
    expires_in_s: int
    max_asks: int = ASKS_PER_RUN_DEFAULT

    def text(self) -> str:
        what = f"{self.tool} on {self.host}" if self.host else self.tool
        return (f"APPROVAL REQUIRED: {what} needs the owner's approval ({self.reason}). The call did not run: "
                "you cannot wait for an answer here, so do not retry it yourself. Delegate it to a worker "
                "(spawn_worker), whose call waits for the owner's approval, or carry on without it and say in "
                "your answer that it needs the owner's approval.")


def too_many_asks_text(tool: str, asked: int) -> str:
    return (f"DENIED: this run already asked the owner {asked} time(s), the most one run may ask (the owner's "
            f"approval policy, max_asks_per_run); {tool} did not run and will not be asked about. Carry on "
            "without it and say in your answer what still needs the owner's approval.")


def denied_text(decision: Decision) -> str:
    return f"DENIED: denied by the owner's policy: {decision.reason}. The call did not run; do not retry it."
