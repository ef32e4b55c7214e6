"""What an owner's data is: the tables that hold it and the workers whose artifacts are theirs.

Each table is named once below with the one function (in its table module, where its SQL lives)
that yields the owner's rows. ``zerg owners export`` writes one JSON Lines file per entry;
``zerg owners delete`` counts them and relies on ``ON DELETE CASCADE`` from ``owners``.

Adding a table: write ``export_<table>(conn, owner_id) -> Iterator[dict]`` next to its SQL (omit
every secret column: hashes, tokens, keys — :mod:`zerg.privacy.export` refuses columns named like
one) and add one line below, or one line to :data:`NOT_EXPORTED` saying why not.
``tests/test_owner_data.py`` fails while a table with an owner is in neither list, or does not
cascade from ``owners``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from psycopg import Connection

from zerg import owners
from zerg.agents import configs as agent_configs
from zerg.alerts import escalations, inbox
from zerg.approvals import policies as approval_policies
from zerg.approvals import requests as approvals
from zerg.artifacts.store import WorkerArtifactStore
from zerg.hosts import store as hosts
from zerg.identity import devices
from zerg.inbound import messages as inbound_messages
from zerg.llm import ledger
from zerg.mcp_servers import store as mcp_servers
from zerg.memory import embed_failures, facts, files, summaries, terms, vectors, versions
from zerg.notify import contacts, limits, notifications, policy, push_subscriptions
from zerg.runs import events, jobs
from zerg.runs import store as runs
from zerg.runs import threads
from zerg.schedules import fires
from zerg.schedules import store as schedules
from zerg.tracing import store as run_spans


@dataclass(frozen=True)
class OwnerTable:
    name: str
    rows: Callable[[Connection, int], Iterable[dict[str, Any]]]


OWNER_TABLES: tuple[OwnerTable, ...] = (
    OwnerTable("owners", owners.export_owners),
    OwnerTable("owner_contacts", contacts.export_owner_contacts),
    OwnerTable("threads", threads.export_threads),
    OwnerTable("thread_messages", threads.export_thread_messages),
    OwnerTable("runs", runs.export_runs),
    OwnerTable("worker_jobs", jobs.export_worker_jobs),
    OwnerTable("run_events", events.export_run_events),
    OwnerTable("approvals", approvals.export_approvals),
    OwnerTable("llm_calls", ledger.export_llm_calls),
    OwnerTable("run_spans", run_spans.export_run_spans),
    OwnerTable("devices", devices.export_devices),
    OwnerTable("ssh_hosts", hosts.export_ssh_hosts),
    OwnerTable("memory_files", files.export_memory_files),
    OwnerTable("memory_file_versions", versions.export_memory_file_versions),
    OwnerTable("memory_embeddings", vectors.export_memory_embeddings),
    OwnerTable("memory_embedding_failures", embed_failures.export_memory_embedding_failures),
    OwnerTable("memory_terms", terms.export_memory_terms),
    OwnerTable("org_memory", facts.export_org_memory),
    OwnerTable("conversation_summaries", summaries.export_conversation_summaries),
    OwnerTable("schedules", schedules.export_schedules),
    OwnerTable("schedule_fires", fires.export_schedule_fires),
    OwnerTable("notification_policies", policy.export_notification_policies),
    OwnerTable("notification_usage", limits.export_notification_usage),
    OwnerTable("notifications", notifications.export_notifications),
    OwnerTable("inbox_items", inbox.export_inbox_items),
    OwnerTable("escalations", escalations.export_escalations),
    OwnerTable("inbound_messages", inbound_messages.export_inbound_messages),
    OwnerTable("agent_configs", agent_configs.export_agent_configs),
    OwnerTable("push_subscriptions", push_subscriptions.export_push_subscriptions),
    OwnerTable("approval_policies", approval_policies.export_approval_policies),
    OwnerTable("mcp_servers", mcp_servers.export_mcp_servers),
)

# Tables with an owner whose rows are deliberately left out of the archive (still deleted by the
# cascade): table name -> why.
NOT_EXPORTED: dict[str, str] = {
    "sessions": "authentication state (the ids signed into live tokens), not the owner's data; "
                "GET /api/jarvis/sessions lists it",
    "pairing_codes": "one-time codes that live minutes, stored only as hashes",
}


@dataclass(frozen=True)
class OwnerWorkers:
    worker_ids: list[str]  # sorted
    unattributed: int  # workers whose metadata.json cannot be read and that the index does not know


def owner_workers(conn: Connection, store: WorkerArtifactStore, owner_id: int) -> OwnerWorkers:
    """The owner's workers: those the ``worker_jobs`` index gives them (the ownership authority,
    :mod:`zerg.runs.worker_artifacts`), plus those whose ``metadata.json`` names them and that the
    index does not know at all (a worker that crashed before it was indexed, or whose owner's
    rows are already gone). A worker the index gives to someone else is never included."""
    indexed = jobs.owner_worker_ids(conn, owner_id)
    scan = store.owner_workers(owner_id)
    claimed = jobs.worker_owners(conn, scan.worker_ids) if scan.worker_ids else {}
    found = set(indexed) | {w for w in scan.worker_ids if claimed.get(w, owner_id) == owner_id}
    unattributed = [w for w, _ in scan.unreadable if w not in found]
    return OwnerWorkers(sorted(found), len(unattributed))
