"""Configuration: one typed settings object, read from the environment.

Invariants:
- Every knob has a documented default (docs/configuration.md); nothing else reads the
  environment, except the variable an SSH host's ``key_env`` names (the key itself, on purpose
  kept out of the settings object).
- A bad value fails fast with a message that names the variable, never a stack trace deep in a
  request. A ``ZERG_*`` variable that no setting knows is rejected too: a typo must not silently
  fall back to a default.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator

# The default models of each provider (docs/models.md), by setting. With ZERG_MODEL_PROVIDER=anthropic or
# bedrock, a model setting left unset takes its provider's default (not OpenAI's). Every one of them has
# a price (zerg.llm.pricing; tests/test_providers.py checks it).
DEFAULT_MODELS: dict[str, dict[str, str]] = {
    "openai-chat": {"ZERG_SUPERVISOR_MODEL": "gpt-4o", "ZERG_WORKER_MODEL": "gpt-4o-mini",
                    "ZERG_SUMMARY_MODEL": "gpt-4o-mini", "ZERG_INTENT_MODEL": "gpt-4o-mini"},
    "openai": {"ZERG_SUPERVISOR_MODEL": "gpt-4o", "ZERG_WORKER_MODEL": "gpt-4o-mini",
               "ZERG_SUMMARY_MODEL": "gpt-4o-mini", "ZERG_INTENT_MODEL": "gpt-4o-mini"},
    "anthropic": {"ZERG_SUPERVISOR_MODEL": "claude-sonnet-4-6", "ZERG_WORKER_MODEL": "claude-haiku-4-5",
                  "ZERG_SUMMARY_MODEL": "claude-haiku-4-5", "ZERG_INTENT_MODEL": "claude-haiku-4-5"},
    # Amazon Nova: on-demand in the region, no Marketplace subscription or use-case form first
    "bedrock": {"ZERG_SUPERVISOR_MODEL": "amazon.nova-pro-v1:0", "ZERG_WORKER_MODEL": "amazon.nova-lite-v1:0",
                "ZERG_SUMMARY_MODEL": "amazon.nova-lite-v1:0", "ZERG_INTENT_MODEL": "amazon.nova-micro-v1:0"},
}
ModelProvider = Literal["auto", "openai", "openai-chat", "anthropic", "bedrock", "offline"]


class ConfigError(ValueError):
    """Raised when the environment holds an invalid or unknown setting."""


def _default_data_dir(environ: dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    home = Path(env["HOME"]) if env.get("HOME") else Path.home()
    return Path(env.get("XDG_DATA_HOME") or home / ".local" / "share") / "zerg"


def _default_config_dir(environ: dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    home = Path(env["HOME"]) if env.get("HOME") else Path.home()
    return Path(env.get("XDG_CONFIG_HOME") or home / ".config") / "zerg"


_HOST_LABELS = re.compile(r"^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


def _host_pattern(text: str) -> str:
    """One ``ZERG_HTTP_ALLOW_HOSTS`` entry, normalised: a host name, ``*.`` + a domain, or an IP address."""
    pattern = text.strip().lower().rstrip(".")
    try:
        return str(ipaddress.ip_address(pattern.strip("[]")))
    except ValueError:
        pass
    if not _HOST_LABELS.match(pattern) or pattern.count(".") < (2 if pattern.startswith("*.") else 0):
        raise ValueError(f"{text.strip()!r} is not a host pattern: give a name (api.github.com), "
                         "'*.' and a domain (*.example.org) or an IP address")
    return pattern


class SSHHost(BaseModel):
    """One allowlisted SSH target (an entry of ``ZERG_SSH_HOSTS``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    hostname: str = Field(min_length=1)
    port: int = Field(default=22, ge=1, le=65535)
    user: str = Field(min_length=1)
    key_file: Path | None = None  # private key on disk
    key_env: str | None = None  # name of an env var holding the private key (PEM)
    key_secret_arn: str | None = None  # Secrets Manager secret holding the private key (PEM)
    host_key: str | None = None  # "ssh-ed25519 AAAA...": pins the server's key


class Settings(BaseModel):
    """Each field's alias is its environment variable."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    # --- storage -------------------------------------------------------------------------
    database_url: str | None = Field(
        default=None,
        alias="DATABASE_URL",
        description="PostgreSQL URL; unset = the embedded server under ZERG_DATA_DIR/pg.",
    )
    data_dir: Path = Field(
        default_factory=_default_data_dir,
        alias="ZERG_DATA_DIR",
        description="Per-user directory for the embedded database and local artifacts.",
    )
    db_secret_arn: str | None = Field(
        default=None, alias="ZERG_DB_SECRET_ARN",
        description="AWS: Secrets Manager secret with username/password/port/dbname (RDS format).",
    )
    db_proxy_endpoint: str | None = Field(
        default=None, alias="ZERG_DB_PROXY_ENDPOINT", description="AWS: RDS Proxy host (TLS required)."
    )
    db_pool_max: int = Field(
        default=10, ge=1, le=200, alias="ZERG_DB_POOL_MAX"
    )
    db_wait_s: float = Field(
        default=5.0, gt=0, le=60, alias="ZERG_DB_WAIT_S",
        description="How long a request or step waits for a database connection (then 503 at the API).",
    )
    db_retry_s: float = Field(
        default=60.0, ge=0, le=600, alias="ZERG_DB_RETRY_S",
        description="How long a worker keeps retrying its final bookkeeping while the database is unreachable.",
    )
    artifact_backend: Literal["local", "s3"] = Field(
        default="local", alias="ZERG_ARTIFACT_BACKEND"
    )
    artifact_dir: Path | None = Field(
        default=None,
        alias="ZERG_ARTIFACT_DIR",
        description="Local artifact root; unset = ZERG_DATA_DIR/artifacts.",
    )
    artifact_bucket: str | None = Field(
        default=None, alias="ZERG_ARTIFACT_BUCKET"
    )
    artifact_retention_days: int | None = Field(
        default=None, ge=1, le=36_500, alias="ZERG_ARTIFACT_RETENTION_DAYS",
        description="Workers older than this many days lose their artifacts and index rows unless pinned; "
                    "unset = keep forever.",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        default="INFO", alias="ZERG_LOG_LEVEL"
    )
    lambda_function_name: str | None = Field(
        default=None, alias="AWS_LAMBDA_FUNCTION_NAME",
        description="Set by the Lambda runtime: logs and metrics go to stdout (CloudWatch).",
    )
    # Set by the Lambda runtime too; with the function name, the evidence zerg.hosting asks for.
    lambda_runtime_api: str | None = Field(default=None, alias="AWS_LAMBDA_RUNTIME_API")
    lambda_task_root: str | None = Field(default=None, alias="LAMBDA_TASK_ROOT")

    # --- models ----------------------------------------------------------------------------
    openai_api_key: SecretStr | None = Field(default=None, alias="OPENAI_API_KEY")
    openai_base_url: str | None = Field(default=None, alias="OPENAI_BASE_URL")
    openai_secret_arn: str | None = Field(default=None, alias="ZERG_OPENAI_SECRET_ARN")
    model_provider: ModelProvider = Field(
        default="auto", alias="ZERG_MODEL_PROVIDER",
        description="The provider of a bare model name (one without provider:): auto = openai-chat with an OpenAI "
                    "key or OPENAI_BASE_URL, else offline; openai (Responses), openai-chat, anthropic, bedrock, offline.",
    )
    anthropic_api_key: SecretStr | None = Field(default=None, alias="ANTHROPIC_API_KEY")
    anthropic_base_url: str | None = Field(default=None, alias="ANTHROPIC_BASE_URL")
    anthropic_secret_arn: str | None = Field(default=None, alias="ZERG_ANTHROPIC_SECRET_ARN")
    bedrock_region: str | None = Field(default=None, alias="ZERG_BEDROCK_REGION")
    bedrock_endpoint_url: str | None = Field(default=None, alias="ZERG_BEDROCK_ENDPOINT_URL")
    bedrock_model_ids: str | None = Field(
        default=None, alias="ZERG_BEDROCK_MODEL_IDS",
        description="AWS (set by the CDK app): the Bedrock model ids the functions may invoke, comma-separated.",
    )
    aws_region: str | None = Field(default=None, alias="AWS_REGION")
    aws_default_region: str | None = Field(default=None, alias="AWS_DEFAULT_REGION")
    supervisor_model: str = Field(default="gpt-4o", alias="ZERG_SUPERVISOR_MODEL")
    worker_model: str = Field(default="gpt-4o-mini", alias="ZERG_WORKER_MODEL")
    summary_model: str = Field(default="gpt-4o-mini", alias="ZERG_SUMMARY_MODEL")
    # The agent default of a run's budget (issue 27): used when neither the request nor the owner sets one.
    run_usd_budget: float | None = Field(default=None, ge=0, le=1_000_000, alias="ZERG_RUN_USD_BUDGET")
    run_token_budget: int | None = Field(default=None, ge=0, alias="ZERG_RUN_TOKEN_BUDGET")
    llm_max_retries: int = Field(default=3, ge=0, le=10, alias="ZERG_LLM_MAX_RETRIES")
    llm_timeout_s: float = Field(default=60.0, gt=0, le=600, alias="ZERG_LLM_TIMEOUT_S")
    embeddings: Literal["auto", "openai", "bedrock", "local", "off"] = Field(
        default="auto", alias="ZERG_EMBEDDINGS",
        description="Memory search vectors: auto = OpenAI text-embedding-3-small with an OpenAI key or endpoint, "
                    "else Bedrock's Titan Text Embeddings V2 with ZERG_MODEL_PROVIDER=bedrock, else the local "
                    "all-MiniLM-L6-v2 when installed, else off (full-text only).",
    )
    embedding_timeout_s: float = Field(
        default=2.0, gt=0, le=60, alias="ZERG_EMBEDDING_TIMEOUT_S",
        description="Hard limit of one embedding call; past it search is full-text only for that query.",
    )

    # --- the supervisor and the state machine ---------------------------------------------
    supervisor_max_rounds: int = Field(default=3, ge=1, le=20, alias="ZERG_SUPERVISOR_MAX_ROUNDS")
    supervisor_max_workers: int = Field(default=10, ge=1, le=100, alias="ZERG_SUPERVISOR_MAX_WORKERS")
    supervisor_max_steps: int = Field(default=8, ge=1, le=50, alias="ZERG_SUPERVISOR_MAX_STEPS")
    evidence_budget_bytes: int = Field(
        default=32_000, ge=2_000, le=500_000, alias="ZERG_EVIDENCE_BUDGET_BYTES",
        description="Cap of the evidence mount's share of ZERG_CONTEXT_BUDGET_BYTES.",
    )
    context_budget_bytes: int = Field(
        default=40_000, ge=16_000, le=2_000_000, alias="ZERG_CONTEXT_BUDGET_BYTES",
        description="Size of every supervisor request (JSON bytes of its messages): the prompt and the task, "
                    "then shares for the thread, the memory layer, the evidence mount and the run's messages.",
    )
    map_concurrency: int = Field(default=5, ge=1, le=40, alias="ZERG_MAP_CONCURRENCY")
    # How long a tool call waits for the owner's approval before the model is told "no answer" (issue 27;
    # the run machine's input, its AwaitApproval state's TimeoutSecondsPath).
    approval_timeout_s: int = Field(default=3600, ge=1, le=86400, alias="ZERG_APPROVAL_TIMEOUT_S")
    run_timeout_s: float = Field(
        default=600.0, ge=1, le=3000, alias="ZERG_RUN_TIMEOUT_S",
        description="A run's deadline: near it, unfinished workers are cancelled and the supervisor "
                    "answers with what exists (the run ends timeout). Above the 300 s worker timeout on purpose.",
    )

    # --- long-term memory (the writes after a run) --------------------------------------------
    memory_extract: bool = Field(
        default=True, alias="ZERG_MEMORY_EXTRACT",
        description="on: after a run whose conversation states a fact, preference or decision, one model "
                    "call extracts up to 3 organisational memories; off: no extraction call at all.",
    )
    memory_timeout_s: float = Field(
        default=30.0, gt=0, le=300, alias="ZERG_MEMORY_TIMEOUT_S",
        description="Budget of each post-run memory model call (episode, extraction); past it the "
                    "episode falls back to truncation and extraction adds nothing.",
    )

    # --- background runs: schedules, notifications, escalation -----------------------------------
    schedule_group: str | None = Field(
        default=None, alias="ZERG_SCHEDULE_GROUP",
        description="AWS: the EventBridge Scheduler group owners' schedules live in; set = schedules are "
                    "Scheduler schedules, unset = the local ticker of `zerg serve` fires them.",
    )
    scheduler_role_arn: str | None = Field(
        default=None, alias="ZERG_SCHEDULER_ROLE_ARN", description="AWS: the role Scheduler assumes to invoke the target.")
    schedule_dlq_arn: str | None = Field(
        default=None, alias="ZERG_SCHEDULE_DLQ_ARN", description="AWS: where undeliverable schedule fires land.")
    schedule_target_arn: str | None = Field(
        default=None, alias="ZERG_SCHEDULE_TARGET_ARN", description="AWS: the ingress function schedules invoke.")
    tick_s: float = Field(
        default=15.0, ge=0.05, le=300, alias="ZERG_TICK_S",
        description="Local: how often the ticker of `zerg serve` looks for due schedules.",
    )
    notifier: Literal["local", "aws"] = Field(
        default="local", alias="ZERG_NOTIFIER",
        description="local: email as .eml and SMS as .json files under ZERG_DATA_DIR/outbox; aws: SES v2 and SNS.",
    )
    sender_email: str = Field(
        default="zerg@zerg.localhost", alias="ZERG_SENDER_EMAIL", description="The From address of Zerg's email.")
    mail_domain: str = Field(
        default="zerg.localhost", alias="ZERG_MAIL_DOMAIN",
        description="Replies go to reply+{token}@ this domain (the SES receipt rule's recipient).",
    )
    sms_origination: str | None = Field(
        default=None, alias="ZERG_SMS_ORIGINATION",
        description="AWS: the origination number (E.164) or sender id SMS are sent from; unset = the account default.",
    )
    alert_topic_arn: str | None = Field(
        default=None, alias="ZERG_ALERT_TOPIC_ARN", description="AWS: the operators' topic (failed deliveries).")
    escalation_state_machine_arn: str | None = Field(
        default=None, alias="ZERG_ESCALATION_STATE_MACHINE_ARN",
        description="AWS: the escalation state machine; unset = the local engine runs the same ASL.",
    )
    public_url: str | None = Field(
        default=None, alias="ZERG_PUBLIC_URL",
        description="Base URL of links in alerts and digests; unset = ZERG_API_URL.",
    )
    inbound_max_bytes: int = Field(
        default=10 * 1024 * 1024, ge=64 * 1024, le=40 * 1024 * 1024, alias="ZERG_INBOUND_MAX_BYTES",
        description="Replies: a raw inbound email larger than this is refused unread (kept, recorded).",
    )
    reply_token_days: int = Field(
        default=30, ge=1, le=365, alias="ZERG_REPLY_TOKEN_DAYS",
        description="Replies: how long a notification's reply token (and Message-ID) is accepted.",
    )
    inbound_dir: Path | None = Field(
        default=None, alias="ZERG_INBOUND_DIR",
        description="Local: `zerg serve` takes replies dropped here (*.eml, *.json SMS); unset = ZERG_DATA_DIR/inbound.",
    )
    local_inbound_verdicts: Literal["headers", "off"] = Field(
        default="headers", alias="ZERG_LOCAL_INBOUND_VERDICTS",
        description="Local replies: headers = refuse a message whose SES/Authentication-Results headers say an "
                    "SPF, DKIM, spam or virus check failed; off = do not look. On AWS the SES verdicts always apply.",
    )

    push_contact: str | None = Field(
        default=None, alias="ZERG_PUSH_CONTACT", max_length=200,
        description="Web Push: the VAPID contact (sub claim), mailto: or https:; unset = mailto:ZERG_SENDER_EMAIL.",
    )
    push_allow_loopback: bool = Field(
        default=False, alias="ZERG_PUSH_ALLOW_LOOPBACK",
        description="Web Push: accept http:// subscription endpoints on loopback (tests only; refused on AWS).",
    )
    push_timeout_s: float = Field(
        default=10.0, gt=0, le=60, alias="ZERG_PUSH_TIMEOUT_S",
        description="Web Push: how long one send to a push service may take (connect and read).",
    )

    # --- tracing (docs/tracing.md): OpenTelemetry's own variables, and where spans are kept ---------
    otel_exporter_otlp_endpoint: str | None = Field(
        default=None, alias="OTEL_EXPORTER_OTLP_ENDPOINT",
        description="OTLP/HTTP base URL (…/v1/traces is appended): set, every run is one trace exported there.",
    )
    otel_exporter_otlp_traces_endpoint: str | None = Field(
        default=None, alias="OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        description="The full OTLP/HTTP traces URL; wins over OTEL_EXPORTER_OTLP_ENDPOINT.",
    )
    otel_sdk_disabled: bool = Field(
        default=False, alias="OTEL_SDK_DISABLED", description="true: no tracing, whatever else is set.",
    )
    otel_service_name: str = Field(default="zerg", min_length=1, alias="OTEL_SERVICE_NAME")
    otel_semconv_stability_opt_in: str | None = Field(
        default=None, alias="OTEL_SEMCONV_STABILITY_OPT_IN",
        description="gen_ai_latest_experimental: the GenAI conventions' latest pinned version (1.41.0), else 1.36.0.",
    )
    otel_capture_message_content: str | None = Field(
        default=None, alias="OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
        description="true (or span_only, span_and_event): spans carry prompts, answers, tool arguments and results.",
    )
    trace_retention_days: int = Field(
        default=30, ge=1, le=36_500, alias="ZERG_TRACE_RETENTION_DAYS",
        description="Kept spans older than this many days are deleted daily by zerg serve (36500: kept for good).",
    )
    trace_store: Literal["auto", "on", "off"] = Field(
        default="auto", alias="ZERG_TRACE_STORE",
        description="Keep every run's spans in the database (its waterfall); auto: in `zerg serve`, and in any "
                    "local runtime with an OTLP endpoint set.",
    )

    # --- the HTTP API ---------------------------------------------------------------------------
    jwt_secret: SecretStr | None = Field(default=None, alias="ZERG_JWT_SECRET")
    jwt_secret_arn: str | None = Field(default=None, alias="ZERG_JWT_SECRET_ARN")
    task_max_bytes: int = Field(default=8192, ge=256, le=1_000_000, alias="ZERG_TASK_MAX_BYTES")
    sse_poll_s: float = Field(default=25.0, gt=0, le=29, alias="ZERG_SSE_POLL_S")
    heartbeat_s: float = Field(default=30.0, gt=0, le=300, alias="ZERG_HEARTBEAT_S")
    state_machine_arn: str | None = Field(default=None, alias="ZERG_STATE_MACHINE_ARN")
    device_secret: SecretStr | None = Field(default=None, alias="ZERG_DEVICE_SECRET")
    api_url: str = Field(default="http://127.0.0.1:8000", alias="ZERG_API_URL")
    config_dir: Path = Field(
        default_factory=_default_config_dir, alias="ZERG_CONFIG_DIR",
        description="Per-user client configuration: the session tokens `zerg login` keeps (0700/0600).",
    )
    # The request contract of POST /api/jarvis/supervisor (seed 5.1): what a client may send along.
    previous_messages_max: int = Field(
        default=20, ge=1, le=200, alias="ZERG_PREVIOUS_MESSAGES_MAX",
        description="At most this many context.previous_messages in one request (more: 422).",
    )
    client_context_max_bytes: int = Field(
        default=32_768, ge=1_024, le=1_000_000, alias="ZERG_CLIENT_CONTEXT_MAX_BYTES",
        description="At most this many bytes of context (as compact JSON) in one request (more: 413).",
    )
    estimate_default_s: int = Field(
        default=30, ge=1, le=3000, alias="ZERG_ESTIMATE_DEFAULT_S",
        description="estimated_duration_seconds of a run when the owner has no comparable finished run yet.",
    )

    # --- Jarvis: intent routing, quick mode, voice ------------------------------------------------
    intent_model: str = Field(
        default="gpt-4o-mini", alias="ZERG_INTENT_MODEL",
        description="The model POST /api/jarvis/route asks when its rules cannot tell quick from supervisor.",
    )
    intent_timeout_s: float = Field(
        default=2.0, gt=0, le=30, alias="ZERG_INTENT_TIMEOUT_S",
        description="Budget of that one intent call; past it (or on any failure) the request goes to the supervisor.",
    )
    quick_model: str | None = Field(
        default=None, alias="ZERG_QUICK_MODEL",
        description="The model of POST /api/jarvis/quick; unset = ZERG_SUPERVISOR_MODEL.",
    )
    quick_timeout_s: float = Field(
        default=10.0, gt=0, le=120, alias="ZERG_QUICK_TIMEOUT_S",
        description="Budget of a quick answer's model call (retries included); past it the answer is 503.",
    )
    realtime_model: str = Field(
        default="gpt-realtime", alias="ZERG_REALTIME_MODEL",
        description="The OpenAI Realtime model of the voice sessions POST /api/jarvis/realtime/session mints.",
    )
    realtime_voice: str = Field(
        default="alloy", min_length=1, max_length=40, pattern=r"^[A-Za-z0-9_-]+$", alias="ZERG_REALTIME_VOICE",
        description="The voice of those sessions (alloy, ash, ballad, coral, echo, sage, shimmer, verse, marin, cedar).",
    )
    realtime_ttl_s: int = Field(
        default=120, ge=10, le=7200, alias="ZERG_REALTIME_TTL_S",
        description="How long a minted voice session's client secret can open a session (OpenAI allows 10-7200 s).",
    )

    # --- workers and their tools -----------------------------------------------------------
    worker_timeout_s: float = Field(default=300.0, gt=0, le=900, alias="ZERG_WORKER_TIMEOUT_S")
    worker_max_iterations: int = Field(default=12, ge=1, le=100, alias="ZERG_WORKER_MAX_ITERATIONS")
    tool_output_cap: int = Field(default=10_000, ge=256, le=1_000_000, alias="ZERG_TOOL_OUTPUT_CAP")
    ssh_hosts: dict[str, SSHHost] = Field(default_factory=dict, alias="ZERG_SSH_HOSTS")
    ssh_known_hosts: Path | None = Field(default=None, alias="ZERG_SSH_KNOWN_HOSTS")
    kms_key_id: str | None = Field(
        default=None, alias="ZERG_KMS_KEY_ID",
        description="AWS: KMS key sealing owners' SSH keys; unset = AES-GCM under ZERG_DATA_DIR/sealing.key.",
    )
    http_allow_networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = Field(
        default=(), alias="ZERG_HTTP_ALLOW_NETWORKS"
    )
    http_body_cap: int = Field(default=20_000, ge=256, le=5_000_000, alias="ZERG_HTTP_BODY_CAP")
    http_allow_hosts: tuple[str, ...] = Field(
        default=(), alias="ZERG_HTTP_ALLOW_HOSTS",
        description="Host patterns http_request may reach (api.github.com, *.example.org); empty = any public host.",
    )
    web_dir: Path | None = Field(
        default=None, alias="ZERG_WEB_DIR",
        description="The built web app `zerg serve` serves outside /api/; unset = web/dist of the source checkout.",
    )
    mcp_stdio_paths: tuple[str, ...] = Field(
        default=(), alias="ZERG_MCP_STDIO_PATHS",
        description="Host directories an owner's stdio MCP server sees read-only in its sandbox (comma-separated; "
                    "their bin/ lead PATH); empty = the Python installation Zerg runs on.",
    )
    mcp_timeout_s: float = Field(
        default=60, gt=0, le=600, alias="ZERG_MCP_TIMEOUT_S",
        description="Seconds one MCP tool call or listing may take (a worker's deadline may cut it shorter).",
    )
    sandbox_network: bool = Field(
        default=False, alias="ZERG_SANDBOX_NETWORK",
        description="on: container_exec commands get the host's network; off: only their own lo.",
    )
    sandbox_file_mib: int = Field(
        default=50, ge=1, le=10_240, alias="ZERG_SANDBOX_FILE_MIB",
        description="The largest file a container_exec command may write (RLIMIT_FSIZE), MiB.",
    )
    sandbox_memory_mib: int = Field(
        default=1024, ge=64, le=1_048_576, alias="ZERG_SANDBOX_MEMORY_MIB",
        description="The address space of each container_exec process (RLIMIT_AS), MiB.",
    )
    sandbox_cpu_s: int = Field(
        default=120, ge=1, le=3600, alias="ZERG_SANDBOX_CPU_S",
        description="CPU seconds each container_exec process may use (RLIMIT_CPU; SIGXCPU, then SIGKILL 1 s later).",
    )
    sandbox_writable_mib: int = Field(
        default=256, ge=1, le=65_536, alias="ZERG_SANDBOX_WRITABLE_MIB",
        description="The size of each of a container_exec call's home and /tmp (a tmpfs each, namespace levels), MiB.",
    )

    @model_validator(mode="before")
    @classmethod
    def _provider_defaults(cls, values: Any) -> Any:
        """A model setting left unset takes the default of ZERG_MODEL_PROVIDER's provider."""
        if not isinstance(values, dict):
            return values
        provider = values.get("ZERG_MODEL_PROVIDER", values.get("model_provider"))
        if provider in ("anthropic", "bedrock"):
            names = {f.alias: name for name, f in cls.model_fields.items() if f.alias}
            unset = {alias: model for alias, model in DEFAULT_MODELS[provider].items()
                     if alias not in values and names[alias] not in values}
            values = {**values, **unset}
        return values

    @field_validator("ssh_hosts", mode="before")
    @classmethod
    def _json_hosts(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                return json.loads(value)
            except ValueError as exc:
                raise ValueError(f"not valid JSON ({exc})") from None
        return value

    @field_validator("http_allow_networks", mode="before")
    @classmethod
    def _networks(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(ipaddress.ip_network(p.strip()) for p in value.split(",") if p.strip())
        return value

    @field_validator("mcp_stdio_paths", mode="before")
    @classmethod
    def _paths(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [p.strip() for p in value.split(",") if p.strip()]
        for path in value:
            if not str(path).startswith("/"):
                raise ValueError(f"{path!r} is not an absolute path")
        return tuple(value)

    @field_validator("http_allow_hosts", mode="before")
    @classmethod
    def _host_patterns(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [p for p in value.split(",") if p.strip()]
        return tuple(_host_pattern(p) for p in value)

    @field_validator("embeddings", "trace_store", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @property
    def artifact_root(self) -> Path:
        return self.artifact_dir or self.data_dir / "artifacts"

    @property
    def inbound_root(self) -> Path:
        """Local replies: the watched drop directory (``new/``) and where raw messages are kept."""
        return self.inbound_dir or self.data_dir / "inbound"

    @property
    def offline(self) -> bool:
        """Bare model names go to the deterministic offline provider: ZERG_MODEL_PROVIDER=offline, or
        auto with no OpenAI key and no endpoint."""
        if self.model_provider != "auto":
            return self.model_provider == "offline"
        return self.openai_api_key is None and not self.openai_base_url and not self.openai_secret_arn

    @property
    def openai_configured(self) -> bool:
        """An OpenAI key, key secret or compatible endpoint is set (the OpenAI embedder can be had)."""
        return self.openai_api_key is not None or bool(self.openai_base_url) or bool(self.openai_secret_arn)

    @property
    def default_provider(self) -> str:
        """The provider of a bare model name (ZERG_MODEL_PROVIDER, auto resolved)."""
        if self.model_provider != "auto":
            return self.model_provider
        return "offline" if self.offline else "openai-chat"

    @property
    def region_for_bedrock(self) -> str | None:
        return self.bedrock_region or self.aws_region or self.aws_default_region

    def check(self) -> "Settings":
        if self.context_budget_bytes < self.task_max_bytes + 8_000:
            raise ConfigError(
                f"ZERG_CONTEXT_BUDGET_BYTES={self.context_budget_bytes} leaves no room beside a task of "
                f"ZERG_TASK_MAX_BYTES={self.task_max_bytes}: give it at least {self.task_max_bytes + 8_000}"
            )
        if self.schedule_group:  # schedules on EventBridge Scheduler: whom to invoke, as whom, where failures go
            for variable, value in (("ZERG_SCHEDULER_ROLE_ARN", self.scheduler_role_arn),
                                    ("ZERG_SCHEDULE_TARGET_ARN", self.schedule_target_arn),
                                    ("ZERG_SCHEDULE_DLQ_ARN", self.schedule_dlq_arn)):
                if not value:
                    raise ConfigError(f"{variable} must be set when ZERG_SCHEDULE_GROUP is set")
        if self.push_allow_loopback and (self.lambda_function_name or self.lambda_runtime_api or self.lambda_task_root):
            raise ConfigError("ZERG_PUSH_ALLOW_LOOPBACK=true is refused on Lambda: push endpoints there are public "
                              "push services only (the setting is for tests on one machine)")
        if self.artifact_backend == "s3" and not self.artifact_bucket:
            raise ConfigError(
                "ZERG_ARTIFACT_BUCKET must be set when ZERG_ARTIFACT_BACKEND=s3"
            )
        return self


def _env_names() -> dict[str, str]:
    """Map each accepted environment variable name to its field name."""
    return {field.alias: name for name, field in Settings.model_fields.items() if field.alias}


def load_settings(environ: dict[str, str] | None = None) -> Settings:
    """Build settings from ``environ`` (default ``os.environ``), failing with a clear message."""
    env = dict(os.environ if environ is None else environ)
    known = _env_names()
    # ZERG_SSH_KEY_* may hold SSH private keys named by a host's key_env.
    unknown = sorted(
        k for k in env if k.startswith("ZERG_") and k not in known and not k.startswith("ZERG_SSH_KEY_")
    )
    if unknown:
        raise ConfigError(
            f"unknown setting {unknown[0]}: not one of {', '.join(sorted(k for k in known if k.startswith('ZERG_')))}"
        )
    values = {k: v for k, v in env.items() if k in known and v != ""}
    values.setdefault("ZERG_DATA_DIR", str(_default_data_dir(env)))
    values.setdefault("ZERG_CONFIG_DIR", str(_default_config_dir(env)))
    try:
        settings = Settings.model_validate(values)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = str(err["loc"][0]) if err["loc"] else "?"
        var = Settings.model_fields[field].alias if field in Settings.model_fields else field
        secret = var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ZERG_JWT_SECRET", "ZERG_DEVICE_SECRET")
        shown = "<secret>" if secret else repr(env.get(var))
        where = ".".join(str(p) for p in err["loc"][1:])
        raise ConfigError(
            f"invalid {var}={shown}: {err['msg']}" + (f" (at {where})" if where else "")
        ) from None
    return settings.check()


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (cached; tests call ``get_settings.cache_clear()``)."""
    return load_settings()
