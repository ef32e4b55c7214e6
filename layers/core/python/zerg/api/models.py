"""What the API answers, as the OpenAPI document describes it: response bodies and the error body.

Handlers still build their bodies as dicts (``deps.json_response``); these models document the
shapes, and ``responses()`` lists each operation's real statuses so the document matches the API.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, Field

from zerg.statuses import JobStatus, RunStatus


class ErrorBody(BaseModel):
    """The one shape of every error (``zerg.api.errors.error_body``)."""

    error: str = Field(description="A stable code: unauthorized, not_found, validation_error, ...")
    message: str = Field(description="What exactly was wrong, for a human")


class AuthToken(BaseModel):
    token: str
    token_type: str = "bearer"
    expires_at: datetime
    owner_id: int
    session_id: UUID = Field(description="The token's session: GET /api/jarvis/sessions lists it, DELETE revokes it")
    device_id: int


class PairedDevice(BaseModel):
    owner_id: int
    device_id: int
    device_name: str
    device_secret: str = Field(description="Shown once: store it on the device; POST /api/jarvis/auth exchanges it")


class DeviceInfo(BaseModel):
    device_id: int
    name: str
    created_at: datetime
    last_seen_at: datetime | None = Field(description="Within a minute of the device's last request")
    revoked_at: datetime | None
    active: bool


class SessionInfo(BaseModel):
    session_id: UUID
    device_id: int
    device_name: str
    issued_at: datetime
    expires_at: datetime
    last_used_at: datetime | None = Field(description="Within a minute of the session's last request")
    revoked_at: datetime | None
    active: bool
    current: bool = Field(description="The session of this request")


class SessionList(BaseModel):
    devices: list[DeviceInfo] = Field(description="Oldest first, revoked ones included; never a secret or hash")
    sessions: list[SessionInfo] = Field(description="Newest first (at most 100); ended ones are kept 30 days")


class OwnerInfo(BaseModel):
    owner_id: int
    name: str = Field(description="The owner's name, as `zerg owners add` created it (the web client's header)")


class SessionRevoked(BaseModel):
    session_id: UUID
    revoked_at: datetime


class DeviceRevoked(BaseModel):
    device_id: int
    name: str
    revoked_at: datetime
    sessions_revoked: int = Field(description="Sessions of this device that were live until now")


class RunAccepted(BaseModel):
    run_id: int
    thread_id: int
    status: RunStatus
    stream_url: str = Field(description="The run's Server-Sent Events")
    estimated_duration_seconds: int = Field(ge=1, description=(
        "The median duration of the owner's last 20 API runs that answered, rounded up and at most the run "
        "deadline (ZERG_RUN_TIMEOUT_S); ZERG_ESTIMATE_DEFAULT_S (30) before there is one"))


class RunEventFrame(BaseModel):
    """One Server-Sent Event of a run's stream (the stream is a sequence of these, then ``retry:``)."""

    id: str | None = Field(default=None, description="The event's row id (resume after it); absent on heartbeats")
    event: str = Field(description="supervisor_started, worker_spawned, ..., supervisor_complete or error; heartbeat")
    data: str = Field(description="The event's payload, a JSON object")


class RunCancelled(BaseModel):
    run_id: int
    status: RunStatus


class JobUsage(BaseModel):
    calls: int
    tokens_in: int
    tokens_out: int
    cost_usd: float = Field(description="USD; a call of unknown price counts 0")
    cost_known: bool = Field(description="False when some of these calls had no known price")


class WorkerToolCall(BaseModel):
    path: str | None = Field(description="Its output, a file of the worker (tool_calls/NNN_tool.txt)")
    tool: str | None
    ok: bool | None
    exit_code: int | None
    exit_signal: str | None = Field(description="The signal that ended a shell command (e.g. TERM); exit_code is then null")
    command: str | None = Field(description="What it did in one line (the shell command, URL, query...), at most 300 "
                                            "characters; null when its arguments named nothing of the kind")
    started_at: str | None = Field(description="ISO time the call started (null for workers older than issue 29)")
    duration_ms: int | None


class RunWorker(BaseModel):
    job_id: int
    worker_id: str | None
    task: str
    title: str = Field(description="A short title from the task (its first sentence, at most 60 characters)")
    status: JobStatus
    started_at: datetime | None
    finished_at: datetime | None
    duration_ms: int | None
    summary: str | None
    error: str | None
    command: str | None = Field(description="The first command (or URL, query...) the worker ran; null before it "
                                            "finished or when it ran none")
    tool_calls: list[WorkerToolCall] = Field(description="Its tool calls in order, once it finished")
    usage: JobUsage = Field(description="This worker's model calls (its own and its summary's), from the usage ledger")


class ComponentUsage(BaseModel):
    component: str = Field(description="supervisor, worker, summary, memory, intent or quick")
    calls: int
    tokens_in: int
    tokens_out: int
    cost_usd: float = Field(description="USD; a call of unknown price counts 0")
    cost_known: bool = Field(description="False when some of these calls had no known price")


class TraceSpan(BaseModel):
    span_id: str = Field(description="16 hex digits")
    parent_span_id: str | None = Field(description="The parent's span_id; null for the run's root span")
    name: str = Field(description="invoke_workflow zerg.run, invoke_agent supervisor|worker, chat {model}, "
                                  "execute_tool {tool}, approval_wait, evidence_mount, ...")
    kind: str = Field(description="internal or client (a model call)")
    operation: str | None = Field(description="gen_ai.operation.name: invoke_workflow, invoke_agent, chat, "
                                              "execute_tool; null for Zerg's internal spans")
    start: datetime
    duration_ms: float
    status: Literal["unset", "ok", "error"]
    status_message: str | None
    tokens_in: int = Field(description="Input tokens of this span's model calls, its descendants' included")
    tokens_out: int
    tokens_cached: int = Field(description="Of tokens_in, served from the provider's prompt cache")
    cost_usd: float = Field(
        description="USD of this span's model calls, its descendants' included (unknown prices count 0)")
    attributes: dict[str, Any] = Field(description="The span's OpenTelemetry attributes (gen_ai.*, zerg.*)")
    children: list["TraceSpan"]


class RunTrace(BaseModel):
    run_id: int
    trace_id: str | None = Field(description="32 hex digits; null when no span of the run was kept")
    started_at: datetime | None
    duration_ms: float | None = Field(description="From the first span's start to the last one's end")
    spans: list[TraceSpan] = Field(description="The top-level spans (the run's root span once the run closed)")


class RunDocument(BaseModel):
    run_id: int
    thread_id: int
    status: RunStatus
    trigger: str
    task: str
    started_at: datetime | None
    completed_at: datetime | None
    duration_ms: int | None
    result: str | None = Field(description=(
        "The answer: once the run succeeded, or answered at its deadline (timeout), or the partial answer of a run "
        "stopped at its budget (budget_stopped)"))
    error: str | None
    budget_stopped: bool = Field(description=(
        "The run reached its budget (USD or tokens): it stopped and its result is what its finished workers found"))
    workers: list[RunWorker]
    tokens_used: int
    tokens_in: int
    tokens_out: int
    cost_usd: float | None
    usage_by_component: list[ComponentUsage] = Field(
        description="From the usage ledger: every model call of the run (summaries, memory, intent too)")
    approvals: list[ApprovalView] = Field(
        description="The calls the run asked the owner to approve, oldest first, waiting or answered")
    trace_id: str | None = Field(default=None, description=(
        "The run's OpenTelemetry trace id (32 hex digits) while tracing is on (docs/tracing.md); null otherwise"))


class WorkerFile(BaseModel):
    path: str
    size: int | None = Field(description="Bytes; null for a link or special file (never followed or read)")
    kind: Literal["file", "symlink", "other"] = Field(description="Only regular files can be read")


class WorkerDetail(BaseModel):
    job_id: int
    run_id: int
    worker_id: str | None
    status: JobStatus
    task: str
    title: str = Field(description="A short title from the task (its first sentence, at most 60 characters)")
    summary: str | None
    error: str | None
    started_at: datetime | None
    finished_at: datetime | None
    duration_ms: int | None
    command: str | None = Field(description="The first command (or URL, query...) it ran; null before it finished")
    tool_calls: list[WorkerToolCall] = Field(description="Its tool calls in order (each output is one of its files)")
    metadata: dict[str, Any] | None
    files: list[WorkerFile]


class WorkerPage(BaseModel):
    workers: list[dict[str, Any]] = Field(description="Newest first: summaries, never results")
    next_before_id: int | None = Field(description="Pass as before_id for the next page; null on the last")


class SSHHost(BaseModel):
    """One of the owner's SSH hosts as every read shows it: fingerprints, never key material."""

    alias: str
    hostname: str
    port: int
    user: str
    key_type: str | None = Field(description="ssh-ed25519, ecdsa-sha2-nistp256, ssh-rsa; null for a ZERG_SSH_HOSTS entry")
    key_fingerprint: str | None = Field(description="SHA256 fingerprint of the private key (ssh-keygen -l)")
    host_key_fingerprint: str | None = Field(description="SHA256 fingerprint of the pinned host key")
    source: Literal["owner", "ZERG_SSH_HOSTS"] = Field(
        description="owner: registered by the owner (sealed key); ZERG_SSH_HOSTS: the local owner's bootstrap")
    created_at: datetime | None
    updated_at: datetime | None


class SSHHostList(BaseModel):
    hosts: list[SSHHost] = Field(description="By alias")


class SSHHostTest(BaseModel):
    """What a "test connection" of one host found."""

    alias: str
    ok: bool = Field(description="True when `true` ran there and exited 0")
    message: str = Field(description="What happened, as a sentence (the reason when it failed)")
    host_key_fingerprint: str | None = Field(description="SHA256 fingerprint of the pinned host key (a bootstrap "
                                                         "host without a pin: the key its server presents)")
    presented_host_key_fingerprint: str | None = Field(
        description="The key the server presents, read when it was refused (compare with the pin); else null")
    exit_code: int | None
    duration_ms: int


class ThreadPage(BaseModel):
    thread_id: int | None
    messages: list[dict[str, Any]] = Field(description="Oldest first within the page")
    next_before_id: int | None = Field(description="Pass as before_id for the next page; null on the last")


class InboxItem(BaseModel):
    """One background run's result in the task inbox."""

    run_id: int
    schedule_id: int | None = Field(description="The schedule that started the run (null once deleted)")
    schedule_name: str | None
    severity: Literal["info", "warning", "critical"]
    headline: str
    details: str
    assessed_by: Literal["model", "fallback", "system"] = Field(
        description="model: the supervisor's assessment; fallback: its answer was not one (warning); "
                    "system: a failed worker or run raised the severity")
    created_at: datetime
    acknowledged_at: datetime | None


class InboxList(BaseModel):
    items: list[InboxItem] = Field(description="Unacknowledged first, then newest first")
    approvals: list[ApprovalView] = Field(description="The owner's approvals waiting for an answer, oldest first "
                                                        "(answer them: POST /api/jarvis/approvals/{id}/approve|deny)")


class Fact(BaseModel):
    """One organisational memory (seed 002): added by the post-run extraction, add-only with dedup."""

    id: int
    category: Literal["fact", "decision", "preference", "insight", "reminder", "profile"]
    content: str
    tags: list[str]
    importance: int = Field(ge=1, le=10, description="1-10; a repeated mention raises it")
    writer: Literal["user", "supervisor", "worker", "system"] = Field(description="Who wrote it (system: extracted after a run)")
    source_run_id: int | None = Field(description="The run it was extracted from")
    created_at: datetime
    updated_at: datetime
    forgotten_at: datetime | None = Field(default=None, description="When the owner forgot it (restorable for 30 days)")


class MemoryFileEntry(BaseModel):
    path: str
    title: str
    tags: list[str]
    writer: Literal["user", "supervisor", "worker", "system"] = Field(description="Who wrote the current content")
    updated_at: datetime
    size: int = Field(description="Bytes of UTF-8 content")


class MemoryFileList(BaseModel):
    files: list[MemoryFileEntry] = Field(description="By path (at most limit)")
    total: int = Field(description="Files under the prefix, beyond the limit too")


class MemoryFileDocument(BaseModel):
    path: str
    title: str
    content: str
    tags: list[str]
    metadata: dict[str, Any]
    writer: Literal["user", "supervisor", "worker", "system"] = Field(
        description="Who wrote the current content: text a model wrote from tool output is untrusted")
    writer_run_id: int | None = Field(description="The run that wrote it, if any")
    created_at: datetime
    updated_at: datetime


class FactList(BaseModel):
    facts: list[Fact] = Field(description="Most important first, then most recently updated")


class MemoryFileVersion(BaseModel):
    id: int = Field(description="Pass as version_id to restore it")
    reason: Literal["overwrite", "edit", "delete", "restore"] = Field(description="What replaced this content")
    writer: str = Field(description="Who wrote this content")
    writer_run_id: int | None
    written_at: datetime
    replaced_at: datetime
    title: str
    tags: list[str]
    size: int


class MemoryFileVersionList(BaseModel):
    versions: list[MemoryFileVersion] = Field(description="Newest first; each kept 30 days after it was replaced")


class MemorySearchHit(BaseModel):
    path: str
    title: str
    snippet: str = Field(description="A short excerpt (at most 300 characters)")
    method: Literal["fulltext", "vector", "both"] = Field(description="Which side of the search found it")
    score: float = Field(description="Reciprocal-rank fusion score: higher is better")


class MemorySearchResult(BaseModel):
    hits: list[MemorySearchHit] = Field(description="Best first")
    methods: list[Literal["fulltext", "vector"]] = Field(description="The sides that ran")
    note: str | None = Field(description="Why the vector side did not run, when it did not")


class Schedule(BaseModel):
    """One of the owner's schedules: what the owner wrote, Scheduler's form of it, and when it fires."""

    id: int
    name: str
    kind: Literal["check", "digest", "reminder"]
    task: str
    cron: str | None = Field(description="The 5-field Unix cron as written (one of cron, rate, at is set)")
    rate: str | None = Field(description="The rate as written, e.g. '15 minutes'")
    at: str | None = Field(description="The one-off local time in timezone, e.g. 2026-11-23T09:00:00")
    expression: str = Field(description="EventBridge Scheduler's form: cron(m h dom mon dow y), rate(...) or at(...)")
    timezone: str = Field(description="IANA time zone the expression is read in")
    enabled: bool
    channels: dict[str, list[str]] | None = Field(
        description="Per-severity channel overrides ({\"warning\": [\"email\"]}); null: the notification policy's")
    next_fire_at: datetime | None = Field(description="Null while paused, or once a one-off has fired")
    last_fire_at: datetime | None
    last_run_id: int | None = Field(description="The run its last fire started (check schedules)")
    created_at: datetime
    updated_at: datetime
    fire_usd_budget: float | None = Field(description="check: each fire's run USD budget; null: none")
    fire_token_budget: int | None = Field(description="check: each fire's run token budget; null: none")
    day_usd_budget: float | None = Field(description="check: USD its runs may spend per day; null: none")
    day_token_budget: int | None = Field(description="check: tokens its runs may spend per day; null: none")
    idle_pause_days: int | None = Field(description="Pauses when its results go unseen this many days; null: never")
    idle_paused_at: datetime | None = Field(description="When it paused itself for lack of attention (null after a resume)")


class ScheduleList(BaseModel):
    schedules: list[Schedule] = Field(description="Oldest first")



# --- contacts, the notification policy, notifications (issue 14) -------------------------------

class Contact(BaseModel):
    """One of the owner's contacts: notifications go only to verified ones."""

    id: int
    kind: Literal["email", "sms"]
    address: str = Field(description="An email address, or a phone number in E.164 form")
    verified: bool
    verified_at: datetime | None
    created_at: datetime
    code_expires_at: datetime | None = Field(description="Unverified: when the code sent last expires")
    opted_out_at: datetime | None = Field(
        description="SMS: when the number replied STOP; nothing is texted to it until it replies START. null: not opted out")


class ContactList(BaseModel):
    contacts: list[Contact] = Field(description="By kind, then address")


class ContactAdded(BaseModel):
    contact: Contact
    code_sent: bool = Field(description="true: a 6-digit code went to the address (POST /api/jarvis/contacts/verify "
                                        "with it); false: the contact was verified already")
    notification_id: int | None = Field(description="The notification that carried the code")


class NotificationPolicy(BaseModel):
    """The owner's notification policy (the defaults until changed)."""

    timezone: str = Field(description="IANA time zone of the quiet hours")
    channels: dict[Literal["info", "warning", "critical"], list[Literal["email", "sms"]]] = Field(
        description="Channels per severity")
    quiet_hours: str | None = Field(description="HH:MM-HH:MM in timezone (may wrap midnight); null: none. "
                                                "Holds warning SMS until they end")
    daily_email_limit: int
    daily_sms_limit: int
    push: list[Literal["info", "warning", "critical"]] = Field(
        description="Severities pushed to the owner's browsers (Web Push) when they have a subscription")
    daily_push_limit: int
    daily_usd_cap: float | None = Field(description="Model spending per day in the policy's time zone, USD; null: no cap")
    escalation_repeats: int = Field(description="Repeats of a critical alert until acknowledged")
    escalation_every_s: int = Field(description="Seconds between the repeats")
    run_usd_budget: float | None = Field(description="A run's USD budget unless its request sets one; null: none")
    run_token_budget: int | None = Field(description="A run's token budget unless its request sets one; null: none")
    model_prices: dict[str, list[float]] = Field(description=(
        "USD per million tokens [input, output] of models Zerg has no price for (a budgeted run refuses a model "
        "without a price)"))
    updated_at: datetime | None = Field(description="null: never changed (the defaults)")


class Notification(BaseModel):
    """One email, SMS or push Zerg sent, held or suppressed (never its reply token)."""

    id: int
    channel: Literal["email", "sms", "push"]
    purpose: Literal["alert", "escalation", "digest", "reminder", "verification", "connector", "budget", "answer",
                     "test"] = Field(description="test: POST /api/jarvis/push/test")
    severity: Literal["info", "warning", "critical"] | None
    status: Literal["sent", "suppressed", "held", "failed"]
    reason: str | None = Field(description="Why it was suppressed, held or failed")
    address: str | None = Field(description="The verified contact it went to (push: the push service's origin "
                                            "only); null when there was none")
    subject: str | None
    body: str = Field(description="What was sent (a verification code masked)")
    run_id: int | None
    schedule_id: int | None
    contact_id: int | None
    provider_message_id: str | None
    message_id: str | None = Field(description="The email's Message-ID, for threading")
    attempt: int = Field(description="0: the first alert; n: the n-th repeat of an escalation")
    release_at: datetime | None = Field(description="Held: when quiet hours end")
    created_at: datetime
    sent_at: datetime | None


class NotificationPage(BaseModel):
    notifications: list[Notification] = Field(description="Newest first")
    next_before_id: int | None = Field(description="Pass as before_id for the next page; null on the last")


# --- replies (issue 15) ----------------------------------------------------------------------

class InboundMessage(BaseModel):
    """One email or SMS the owner sent Zerg (a reply to an alert, a directive, a keyword), and
    what became of it."""

    id: int
    channel: Literal["email", "sms"]
    source: Literal["ses", "sns", "local"] = Field(description="How it arrived: SES, two-way SMS, or the local path")
    status: Literal["received", "rejected", "acknowledged", "run", "keyword", "approval", "failed"] = Field(
        description="received: not acted on yet; rejected: refused (reason says why); acknowledged: it "
                    "acknowledged an alert; run: it started run_id (a run that could not start is still run: "
                    "the run itself failed, and its answer says why); keyword: STOP, START or HELP; approval: "
                    "an SMS 'Y 4821'/'N 4821' answered the owner's approval of that code (reason says how); failed: "
                    "an unexpected error while deciding on it, nothing acted on (reason names the error)")
    reason: str | None = Field(description="Why it was rejected, the error that failed it, or what the keyword did")
    received_at: datetime
    sender: str | None = Field(description="The owner's verified address or number it came from")
    subject: str | None
    body_preview: str = Field(description="The reply as read (quotes and signature stripped), at most 200 characters")
    run_id: int | None = Field(description="The run it started")
    answers_run_id: int | None = Field(description="The run whose notification it answers")


class InboundPage(BaseModel):
    messages: list[InboundMessage] = Field(description="Newest first")
    next_before_id: int | None = Field(description="Pass as before_id for the next page; null on the last")


class AgentDefaults(BaseModel):
    model: str = Field(description="The deployment's model for this agent")
    temperature: float | None = Field(description="null: the model's own default")
    max_tokens: int | None = Field(description="null: the model's own default")


class AgentConfig(BaseModel):
    """One agent's configuration for the owner: the effective values (the defaults until changed)."""

    agent: Literal["supervisor", "worker"]
    model: str
    temperature: float | None = Field(description="0 to 2; null: the model's own default")
    max_tokens: int | None = Field(description="Most tokens of each answer; null: the model's own default")
    instructions: str = Field(description="The owner's standing instructions, after Zerg's rules (which win)")
    allowed_tools: list[str] = Field(description="The tools the agent may call (all of available_tools by default); "
                                                 "a scheduled run never gets the person-only ones")
    available_tools: list[str] = Field(description="Every tool the agent can have")
    defaults: AgentDefaults
    updated_at: datetime | None = Field(description="null: never changed (the defaults)")
    tool_descriptions: dict[str, str] = Field(description="What each of available_tools does (what its model reads)")


class AgentConfigList(BaseModel):
    agents: list[AgentConfig] = Field(description="The supervisor, then the worker")
class ModelChoice(BaseModel):
    id: str = Field(description="What to give as an agent's model: bare (the default provider's) or provider:model")
    provider: str | None = Field(description="The provider that serves it")
    source: str = Field(description="The deployment setting(s) naming it (ZERG_WORKER_MODEL, ...) or 'price table'")
    usd_per_million_in: float | None = Field(description="USD per million input tokens; null: no known price")
    usd_per_million_out: float | None = Field(description="USD per million output tokens; null: no known price")


class ModelChoices(BaseModel):
    models: list[ModelChoice] = Field(description="The deployment's models first, then the price table's models of "
                                                  "each provider the deployment can reach (its key or region is set)")
    default_provider: str = Field(description="The provider of a bare model name (ZERG_MODEL_PROVIDER, auto resolved)")


class RouteDecision(BaseModel):
    mode: Literal["quick", "supervisor"] = Field(description="quick: POST /api/jarvis/quick; supervisor: POST /api/jarvis/supervisor")
    reason: str = Field(description="Why, in a few words (a rule's reason, or the intent model's)")
    decided_by: Literal["rules", "model"] = Field(description="rules: the deterministic pre-check (no model call), "
                                                              "or its default when the intent model failed")


class QuickReply(BaseModel):
    mode: Literal["quick"]
    answer: str = Field(description="Plain text (may hold markdown)")
    thread_id: int
    message_ids: list[int] = Field(description="[the user's message, the answer] on the owner's thread")


class RealtimeTool(BaseModel):
    type: Literal["function"]
    name: str
    description: str
    parameters: dict[str, Any]


class RealtimeSession(BaseModel):
    client_secret: str = Field(description="Ephemeral OpenAI Realtime secret (never the server's key)")
    expires_at: int = Field(description="When the secret stops opening sessions, seconds since the epoch")
    model: str
    tools: list[RealtimeTool] = Field(description="The session's one tool: route_to_supervisor(task)")
# --- Web Push (issue 16) ------------------------------------------------------------------------

class PushKey(BaseModel):
    public_key: str = Field(description="The deployment's VAPID public key: the uncompressed P-256 point, base64url "
                                        "(PushManager.subscribe's applicationServerKey)")


class PushSubscription(BaseModel):
    """One of the owner's browser subscriptions (its keys are never returned)."""

    id: int
    endpoint: str = Field(description="The push service URL")
    device_id: int | None = Field(description="The device whose session subscribed")
    created_at: datetime
    last_sent_at: datetime | None = Field(description="The last push the service accepted")
    failures: int = Field(description="Failed pushes since the last accepted one")


class PushSubscriptionList(BaseModel):
    subscriptions: list[PushSubscription] = Field(description="Oldest first")


class PushTestResult(BaseModel):
    notifications: list[Notification] = Field(description="One per subscription: sent, failed (and why) or suppressed")


ERRORS: dict[int, str] = {
    400: "Malformed request (body not JSON, bad header, bad file path)",
    401: "Missing, invalid or expired credentials",
    403: ("cross_origin: the session cookie without the same-origin proof (Origin or Sec-Fetch-Site of this "
          "server, and X-Zerg-Client), or a sign-in from another origin's page"),
    404: "Not found, or not the caller's (the same answer either way)",
    409: "Conflicts with what exists (a name already taken, an entry defined by the configuration)",
    413: "Too large",
    415: "The body is not application/json",
    416: "The Range asked for is outside the file (Content-Range: bytes */SIZE gives its size)",
    422: "A parameter or the body failed validation; the message names it",
    429: "Too soon or over a daily limit; Retry-After says when to try again, when known",
    503: "A dependency is unavailable; retry",
}


def responses(status: int, description: str, model: type[BaseModel] | None = None, *errors: int,
              media_type: str | tuple[str, ...] = "application/json") -> dict[int, dict[str, Any]]:
    """The operation's success response and its error statuses, each with ``ErrorBody``.

    (With ``responses`` given, Powertools drops its automatic success entry, so it is listed here.)
    Every route answers 422 (validation) and 500 (never a trace) besides ``errors``. Without a
    model, a success in ``media_type`` (one or several) is of that type with no schema (a file as
    it is); without a model or a media type other than JSON it has no body (204)."""
    success: dict[str, Any] = {"description": description}
    if model is not None:
        success["content"] = {media_type: {"model": model}}
    elif media_type != "application/json":
        types = (media_type,) if isinstance(media_type, str) else media_type
        success["content"] = {t: {} for t in types}
    else:  # no body (204): without "content", Powertools would document application/json
        success["content"] = {}
    documented: dict[int, dict[str, Any]] = {status: success}
    for code in sorted({*errors, 422}):
        documented[code] = {"description": ERRORS[code], "content": {"application/json": {"model": ErrorBody}}}
    documented[500] = {"description": "Unexpected error; the request id is in the logs",
                       "content": {"application/json": {"model": ErrorBody}}}
    return documented


class SchedulePreview(BaseModel):
    kind: Literal["cron", "rate", "at"]
    text: str = Field(description="The expression as written, tidied ('0 6 * * 1', '15 minutes', '2026-11-23T09:00:00')")
    expression: str = Field(description="EventBridge Scheduler's form: cron(m h dom mon dow y), rate(...) or at(...)")
    timezone: str = Field(description="IANA time zone the expression is read in (the owner's default when not given)")
    fires: list[datetime] = Field(description="The next fires after now, in UTC, oldest first (at: one; none once past)")


class UsageRow(BaseModel):
    key: str = Field(description="A UTC day (YYYY-MM-DD), a model, a component or a worker job id, per group_by")
    calls: int
    tokens_in: int
    tokens_out: int
    cost_usd: float = Field(description="USD; a call of unknown price counts 0")
    cost_known: bool = Field(description="False when some of these calls had no known price")


class UsageTotals(BaseModel):
    calls: int
    tokens_in: int
    tokens_out: int
    cost_usd: float = Field(description="USD; a call of unknown price counts 0")
    cost_known: bool = Field(description="False when some of these calls had no known price")
    runs: int = Field(description="Runs that made a model call in the period (calls of no run count in the rest)")


class UsagePrevious(UsageTotals):
    from_: str = Field(alias="from", description="The first UTC day of the period of equal length just before")
    to: str = Field(description="The day before from")


class UsageReport(BaseModel):
    from_: str = Field(alias="from", description="The first UTC day (YYYY-MM-DD), inclusive")
    to: str = Field(description="The last UTC day (YYYY-MM-DD), inclusive")
    group_by: Literal["day", "model", "component", "job"]
    rows: list[UsageRow] = Field(description="Sorted by key; only keys with calls")
    totals: UsageTotals = Field(description="The whole period (every call, whatever group_by leaves out)")
    previous: UsagePrevious | None = Field(description=(
        "The totals of the period of equal length ending the day before from; null when it would start before 1970"))


class RunListItem(BaseModel):
    id: int
    thread_id: int
    task: str
    trigger: str
    status: RunStatus
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    duration_ms: int | None
    tokens_in: int
    tokens_out: int
    cost_usd: float | None


class RunList(BaseModel):
    runs: list[RunListItem] = Field(description="Newest first")
    next_before_id: int | None = Field(description="Pass as before_id for the next page; null on the last")


class TimelineEvent(BaseModel):
    id: int = Field(description="The event's id (its SSE id)")
    event_type: str
    payload: dict[str, Any]
    created_at: datetime


class RunTimeline(BaseModel):
    run_id: int
    events: list[TimelineEvent] = Field(description="Oldest first")
    truncated: bool = Field(description="True when the run has more events than the timeline shows (2,000)")


class FeedFrame(BaseModel):
    """One Server-Sent Event of the owner-wide feed (a sequence of these, then ``retry:``)."""

    id: str | None = Field(default=None, description="The run event's id (resume after it); absent on heartbeats")
    event: str = Field(description="run_started {run_id, thread_id, task, trigger}, run_finished {run_id, status}, "
                                   "approval_requested {run_id, thread_id, approval_id, tool, arguments, expires_at}, "
                                   "approval_answered {run_id, thread_id, approval_id, status}; heartbeat. A first frame with only an id tells a new client where it starts")
    data: str = Field(description="The payload, a JSON object")


class ApprovalCall(BaseModel):
    """The exact call an approval would let run."""

    tool: str
    arguments: dict[str, Any] = Field(description="Every argument as the tool validated it")
    host: str | None = Field(default=None, description="ssh_exec: the host alias")
    command: str | None = Field(default=None, description="ssh_exec/container_exec: the command")
    url: str | None = Field(default=None, description="http_request: the URL")
    method: str | None = Field(default=None, description="http_request: the method")
    recipient: str | None = Field(default=None, description="send_email/send_sms: who it reaches")


class ApprovalRun(BaseModel):
    id: int
    job_id: int | None = Field(description="The worker job whose call waits; null for a directive")
    task: str | None = Field(description="The run's task")
    trigger: Literal["api", "cli", "schedule", "email", "sms"] | None = Field(
        description="Who started the run: a person (api, cli), a schedule, or an email/SMS reply")


class ApprovalReason(BaseModel):
    untrusted: Literal[True] = True
    note: str = Field(description="How to read text: the model's words, data, never an instruction")
    text: str


class ApprovalView(BaseModel):
    """A tool call, or a directive only the owner decides, waiting for (or answered by) the owner."""

    id: int
    kind: Literal["call", "directive"] = Field(
        description="call: a worker's tool call that waits and runs once approved; directive: a change only the "
                    "owner decides (a new check, deleting a schedule, alert channels, an approval mode...), made "
                    "by Zerg once approved")
    code: str | None = Field(description="Pending only: the short code an SMS answer names (Y 4821 / N 4821)")
    status: Literal["pending", "approved", "denied", "expired", "cancelled", "superseded"] = Field(
        description="superseded: a directive replaced by a newer question (a yes confirms the latest only)")
    summary: str | None = Field(description="A directive: what approving it does, in Zerg's words (null for a call)")
    outcome: str | None = Field(description="An approved directive: what was done, or why not (null otherwise)")
    call: ApprovalCall
    run: ApprovalRun
    reason: ApprovalReason
    asked_because: str | None = Field(description="A call: why the owner's policy asks about it, in Zerg's words "
                                                  "(null for a directive)")
    created_at: datetime
    expires_at: datetime | None = Field(description="null: the wait has not started yet")
    answered_at: datetime | None


class ApprovalList(BaseModel):
    approvals: list[ApprovalView] = Field(description="Pending first (oldest first), then the recent answered ones")


class ApprovalAnswer(BaseModel):
    id: int
    status: Literal["approved", "denied"]
    message: str


class ApprovalPolicyView(BaseModel):
    """The owner's approval policy in effect: every governed tool's mode (the owner's or the default)."""

    tools: dict[str, Literal["allow", "ask", "deny"]] = Field(
        description="Governed tool -> allow (runs), ask (waits for the owner's approval), deny (never runs)")
    ssh_allow: dict[str, list[str]] = Field(description="SSH host alias (or '*') -> command patterns that run "
                                                        "without asking")
    builtin_allowlist: bool = Field(description="The built-in read-only commands run without asking on every host")
    builtin_commands: list[str] = Field(description="The programs the built-in allowlist names")
    expiry_s: int = Field(description="Seconds an approval request waits for the owner's answer")
    max_asks_per_run: int = Field(description="Approvals one run may ask for; past it a call that would ask is "
                                              "refused without asking")
    customised: bool = Field(description="false: the owner never set a policy (all defaults)")
    updated_at: datetime | None = Field(description="null: never set")


class McpTool(BaseModel):
    """One tool of an owner's MCP server, as it was listed (the server's words: data, not instructions)."""

    name: str = Field(description="The tool's name on its server")
    exposed: str = Field(description="The name a worker calls it by: mcp__<server>__<tool>")
    title: str | None
    description: str = Field(description="The server's description (cut to 2,000 characters)")
    read_only: bool = Field(description="The server marks it read-only (readOnlyHint): the policy's default is "
                                        "allow; otherwise ask")
    input_schema: dict[str, Any] = Field(description="The JSON schema of its arguments")


class McpServer(BaseModel):
    """One of the owner's MCP servers: never a secret (a bearer token or client secret is sealed)."""

    name: str
    transport: Literal["http", "stdio"] = Field(description="http: a remote server (streamable HTTP); stdio: a "
                                                            "local command run in the sandbox")
    url: str | None
    command: str | None
    auth: Literal["none", "bearer", "oauth"]
    oauth_client_id: str | None
    allow_private: bool = Field(description="The URL's host may resolve to a private or loopback address")
    tools: list[McpTool] = Field(description="The cached listing, in the server's order")
    tool_count: int
    listing_note: str | None = Field(description="Why the last listing failed, or what it left out")
    listed_at: datetime | None = Field(description="When the cached listing was taken (null: never)")
    created_at: datetime
    updated_at: datetime


class McpServerList(BaseModel):
    servers: list[McpServer] = Field(description="By name")
