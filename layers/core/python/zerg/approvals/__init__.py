"""Approvals: the owner's policy of which tool calls run, wait for the owner or never run
(:mod:`.policy`, pure), the command classifier behind its allowlists (:mod:`.commands`), its table
(:mod:`.policies`), and here the owner's policy as the API, the CLI and the tool gate read and set it.
A call that waits for the owner's answer: its table (:mod:`.requests`) and the wait on the run's
workflow (:mod:`.wait`). A directive only the owner decides is an approval of the same table, made
when approved by the applier registered for it (:mod:`.appliers`); its question's words: :mod:`.question`.

Invariants:
- Every read and write is the calling owner's; the stored document is validated on the way in
  and on the way out (a document that no longer validates is an error, never "no policy").
- What is shown (:func:`view`) is the effective policy: every governed tool's mode, the owner's
  choice or the default, so nobody has to know the defaults to read it.
"""

from __future__ import annotations

from typing import Any

from psycopg import Connection
from pydantic import ValidationError

from zerg.approvals import policies
from zerg.approvals.commands import DEFAULT_RULES
from zerg.approvals.policy import DEFAULT_MODES, Policy


class PolicyUnreadable(RuntimeError):
    """The stored policy does not validate any more (a governed tool was renamed, a bound tightened)."""


def load_policy(conn: Connection, owner_id: int) -> Policy:
    """The owner's policy (the defaults when they set none)."""
    row = policies.get_policy(conn, owner_id)
    if row is None:
        return Policy()
    try:
        return Policy.model_validate(row["policy"])
    except ValidationError as exc:
        raise PolicyUnreadable(f"the stored approval policy of owner {owner_id} is invalid: {exc}") from exc


def set_policy(conn: Connection, owner_id: int, policy: Policy) -> Policy:
    """Replace the owner's policy with ``policy`` (already validated)."""
    policies.put_policy(conn, owner_id, policy.model_dump(mode="json", exclude_defaults=True))
    return policy


def reset_policy(conn: Connection, owner_id: int) -> bool:
    return policies.delete_policy(conn, owner_id)


def view(conn: Connection, owner_id: int) -> dict[str, Any]:
    """The effective policy, as the API returns it and the CLI prints it."""
    row = policies.get_policy(conn, owner_id)
    policy = load_policy(conn, owner_id)
    return {
        "tools": {**{tool: policy.mode(tool) for tool in DEFAULT_MODES},
                  **{tool: mode for tool, mode in sorted(policy.tools.items()) if tool not in DEFAULT_MODES}},
        "ssh_allow": policy.ssh_allow,
        "builtin_allowlist": policy.builtin_allowlist,
        "builtin_commands": [" ".join(rule.lead) for rule in DEFAULT_RULES],
        "expiry_s": policy.expiry_s,
        "max_asks_per_run": policy.max_asks_per_run,
        "customised": row is not None,
        "updated_at": row["updated_at"] if row else None,
    }
