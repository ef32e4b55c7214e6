"""Deploy-time parameters, read once from CDK context (``cdk.json`` or ``-c key=value``).

Invariants:
- Every parameter has a default that synthesizes; ``-c`` values arrive as strings and are
  converted to the field's type here, nowhere else.
- A bad value fails the synth with a message naming the context key.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, fields
from typing import Any

from constructs import Node


class ConfigError(ValueError):
    pass


MODEL_PROVIDERS = ("bedrock", "anthropic", "openai", "openai-chat", "offline")  # zerg.llm.providers.PROVIDERS
TITAN_EMBEDDINGS = "amazon.titan-embed-text-v2:0"  # zerg.embeddings.bedrock.MODEL


@dataclass(frozen=True)
class StageConfig:
    stage: str = "dev"
    # Mail domain Zerg receives replies on (SES receipt rule recipient) and sends from.
    domain: str = "zerg.example.com"
    sender_email: str = "zerg@zerg.example.com"
    # Optional: an address subscribed to the alert topic (confirmed by email).
    alert_email: str = ""
    # Optional: what SMS are sent from (ZERG_SMS_ORIGINATION): an E.164 origination number or an
    # alphanumeric sender ID; unset = the account's default origination identity (AWS End User
    # Messaging, configured outside the stack).
    sms_origination: str = ""
    jarvis_origin: str = "http://localhost:5173"
    # Base of the links in alerts and digests (ZERG_PUBLIC_URL; they open {public_url}/api/jarvis/runs/ID):
    # the API's public address. Unset = jarvis_origin, for a Jarvis that serves /api under its origin.
    public_url: str = ""
    # The functions' model provider (ZERG_MODEL_PROVIDER, docs/models.md): bedrock by default, reached with
    # the functions' own IAM role (no key to store), or openai-chat / openai with the key in the
    # zerg/{stage}/openai secret, or anthropic with the key in zerg/{stage}/anthropic. The models: "" is the provider's default (zerg.config.DEFAULT_MODELS);
    # a model may name its own provider (bedrock:…, openai-chat:…).
    model_provider: str = "bedrock"
    supervisor_model: str = ""
    worker_model: str = ""
    summary_model: str = ""
    # More Bedrock model ids the functions may invoke (comma-separated), for owners' agent configurations:
    # the role may invoke exactly the configured models' ids, these, and Titan Text Embeddings V2 when
    # Bedrock embeds (no OpenAI key).
    bedrock_models: str = ""
    map_concurrency: int = 5
    # Functions reaching the LLM API and SSH hosts need egress; one NAT keeps dev cheap.
    nat_gateways: int = 1
    tracing: bool = False
    # One OpenTelemetry trace per run (docs/tracing.md) sent to X-Ray (and CloudWatch's GenAI
    # Observability) through the ADOT collector layer, an extension on every function that takes the
    # functions' OTLP on localhost:4318. X-Ray (on functions and the state machine) comes with it.
    adot: bool = False
    log_level: str = "INFO"
    log_retention_days: int = 30
    inbound_retention_days: int = 30
    # Workers older than this lose their artifacts and index rows (a daily sweep); 0 = keep forever.
    artifact_retention_days: int = 0
    db_min_capacity: float = 0.5
    db_max_capacity: float = 4.0
    api_rate_limit: int = 20
    api_burst_limit: int = 40
    # The web app (Zerg-{stage}-Web): the built files (`npm run build` in web/) relative to the
    # repo root, or absolute; a missing directory synthesizes the distribution without content.
    web_dist: str = "web/dist"
    # Optional custom domain of the distribution, with an ACM certificate for it in us-east-1
    # (CloudFront's requirement). Both or neither; DNS (a CNAME/alias to the distribution) is yours.
    web_domain: str = ""
    web_certificate_arn: str = ""

    @property
    def xray(self) -> bool:
        """X-Ray active on the functions and the state machine: asked for, or needed by the ADOT collector."""
        return self.tracing or self.adot

    @property
    def is_prod(self) -> bool:
        return self.stage == "prod"

    @property
    def links_base(self) -> str:
        """What links in alerts and digests start with (ZERG_PUBLIC_URL): the app's custom domain
        serves /api through the distribution, so it is the default when set."""
        if self.public_url:
            return self.public_url
        return f"https://{self.web_domain}" if self.web_domain else self.jarvis_origin

    def models(self) -> dict[str, str]:
        """The functions' model settings, by variable, the provider's defaults filled in (intent too: the
        functions take its default, and the role must be able to invoke it)."""
        from zerg.config import DEFAULT_MODELS  # one table of defaults, the core's

        given = {"ZERG_SUPERVISOR_MODEL": self.supervisor_model, "ZERG_WORKER_MODEL": self.worker_model,
                 "ZERG_SUMMARY_MODEL": self.summary_model}
        return {var: given.get(var) or default for var, default in DEFAULT_MODELS[self.model_provider].items()}

    def provider_of(self, model: str) -> tuple[str, str]:
        head, sep, rest = model.partition(":")
        return (head, rest) if sep and head in MODEL_PROVIDERS else (self.model_provider, model)

    @property
    def uses_openai(self) -> bool:
        """Some model of the functions is OpenAI's (Chat Completions or Responses): they need its key."""
        return any(self.provider_of(m)[0] in ("openai", "openai-chat") for m in self.models().values())

    @property
    def uses_anthropic(self) -> bool:
        """Some model of the functions is Anthropic's (the Messages API): they need its key."""
        return any(self.provider_of(m)[0] == "anthropic" for m in self.models().values())

    def bedrock_model_ids(self) -> list[str]:
        """The Bedrock model ids the functions may invoke: the configured models served by Bedrock, the
        extra ``bedrock_models``, and Titan Text Embeddings V2 when Bedrock embeds (no OpenAI key)."""
        ids = [name for provider, name in map(self.provider_of, self.models().values()) if provider == "bedrock"]
        ids += [m.strip() for m in self.bedrock_models.split(",") if m.strip()]
        if self.model_provider == "bedrock" and not self.uses_openai:
            ids.append(TITAN_EMBEDDINGS)
        return list(dict.fromkeys(ids))

    def prefix(self, name: str) -> str:
        """Physical names are ``zerg-{stage}-{name}`` so stages share an account safely."""
        return f"zerg-{self.stage}-{name}"

    @classmethod
    def from_context(cls, node: Node) -> "StageConfig":
        values: dict[str, Any] = {}
        for field in fields(cls):
            raw = node.try_get_context(field.name)
            if raw is not None:
                values[field.name] = _convert(field.name, raw, type(field.default))
        return cls(**values).validate()

    def validate(self) -> "StageConfig":
        checks = [
            ("stage", re.fullmatch(r"[a-z][a-z0-9-]{0,15}", self.stage)),
            ("domain", re.fullmatch(r"[a-z0-9.-]+\.[a-z]{2,}", self.domain)),
            ("sender_email", self.sender_email.endswith("@" + self.domain)),
            ("sms_origination", not self.sms_origination or re.fullmatch(
                r"\+[1-9][0-9]{1,14}|(?=[A-Za-z0-9]*[A-Za-z])[A-Za-z0-9]{1,11}", self.sms_origination)),
            ("jarvis_origin", re.fullmatch(r"https?://[^/\s]+", self.jarvis_origin)),
            ("public_url", not self.public_url or re.fullmatch(r"https?://[^\s?#]+", self.public_url)),
            ("model_provider", self.model_provider in ("bedrock", "openai-chat", "openai", "anthropic")),
            *((key, not value or re.fullmatch(r"[A-Za-z0-9._:/-]{1,200}", value)) for key, value in (
                ("supervisor_model", self.supervisor_model), ("worker_model", self.worker_model),
                ("summary_model", self.summary_model))),
            ("bedrock_models", all(re.fullmatch(r"[A-Za-z0-9._:-]{1,200}", m.strip())
                                   for m in self.bedrock_models.split(",") if m.strip())),
            ("map_concurrency", 1 <= self.map_concurrency <= 40),
            ("nat_gateways", 1 <= self.nat_gateways <= 2),
            ("log_level", self.log_level in {"DEBUG", "INFO", "WARNING", "ERROR"}),
            ("log_retention_days", self.log_retention_days in RETENTION_DAYS),
            ("inbound_retention_days", self.inbound_retention_days >= 1),
            ("artifact_retention_days", 0 <= self.artifact_retention_days <= 36_500),
            ("db_min_capacity", 0 <= self.db_min_capacity <= self.db_max_capacity <= 256),
            ("api_rate_limit", 1 <= self.api_rate_limit <= self.api_burst_limit),
            ("web_dist", self.web_dist.strip() != ""),
            ("web_domain", not self.web_domain or re.fullmatch(
                r"(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}", self.web_domain)),
            # CloudFront takes certificates from us-east-1 only; a domain needs one and vice versa.
            ("web_certificate_arn", bool(self.web_domain) == bool(self.web_certificate_arn) and (
                not self.web_certificate_arn or re.fullmatch(
                    r"arn:aws[a-z-]*:acm:us-east-1:[0-9]{12}:certificate/[0-9a-f-]{36}", self.web_certificate_arn))),
        ]
        for key, ok in checks:
            if not ok:
                raise ConfigError(f"invalid context value {key}={getattr(self, key)!r}")
        return self

    def replace(self, **changes: Any) -> "StageConfig":
        return dataclasses.replace(self, **changes).validate()


# Log retention periods CloudWatch accepts (a subset: the ones worth choosing).
RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 180, 365)


def _convert(key: str, raw: Any, kind: type) -> Any:
    if isinstance(raw, kind) and not (kind is int and isinstance(raw, bool)):
        return raw
    text = str(raw).strip()
    try:
        if kind is bool:
            if text.lower() not in {"true", "false"}:
                raise ValueError(text)
            return text.lower() == "true"
        if kind is float and isinstance(raw, int):
            return float(raw)
        return kind(text)
    except ValueError:
        raise ConfigError(f"context value {key}={raw!r} is not a {kind.__name__}") from None
