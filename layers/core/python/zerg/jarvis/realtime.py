"""Voice: mint a short-lived OpenAI Realtime session for the browser (seed 3.1).

The browser talks to OpenAI Realtime directly (WebRTC) with an ephemeral client secret minted here;
the session's one tool is ``route_to_supervisor(task)``, which the client turns into
``POST /api/jarvis/supervisor``. Quick answers stay in the voice session.

Invariants:
- The server's own API key never leaves the server: the answer carries only the ephemeral secret,
  its expiry, the model and the tool definitions; error messages never quote a key.
- No OpenAI key (offline or keyless deployments) is :class:`RealtimeUnavailable`, naming what to
  configure; so is a provider that refuses or cannot be reached (nothing to retry against here).
- The secret is short-lived (``ZERG_REALTIME_TTL_S``) and minted per request; nothing is stored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from zerg import observability

if TYPE_CHECKING:
    from zerg.config import Settings

MINT_TIMEOUT_S = 10.0
NO_KEY = "voice needs OPENAI_API_KEY; the browser's speech input still works"

ROUTE_TOOL: dict[str, Any] = {
    "type": "function",
    "name": "route_to_supervisor",
    "description": ("Hand the user's request to the Zerg supervisor, which investigates with tools (servers, "
                    "files, logs, the web, mail, schedules) and reports back in the conversation. Use it for "
                    "anything beyond a single fact you can answer at once."),
    "parameters": {
        "type": "object",
        "properties": {"task": {"type": "string", "description": "The user's request, complete and in their words"}},
        "required": ["task"],
        "additionalProperties": False,
    },
}

INSTRUCTIONS = """\
You are Jarvis, a personal assistant speaking with the user. Answer a single fact, a greeting or a
joke yourself, briefly. For anything beyond a single fact (checking servers, files or logs,
research, the user's email or schedules, several steps, anything that takes tools or more than a
few seconds), call route_to_supervisor with the user's complete request and tell the user you are
escalating it to the supervisor for a deeper check. Never pretend to have checked something."""


class RealtimeUnavailable(Exception):
    """No voice session can be minted; the message says why (and what to configure)."""


def session_config(settings: "Settings") -> dict[str, Any]:
    """The Realtime session the secret is minted for."""
    return {
        "type": "realtime",
        "model": settings.realtime_model,
        "instructions": INSTRUCTIONS,
        "tools": [ROUTE_TOOL],
        "tool_choice": "auto",
        "audio": {"output": {"voice": settings.realtime_voice}},
    }


def mint_session(settings: "Settings") -> dict[str, Any]:
    """``{client_secret, expires_at, model, tools}`` of a new ephemeral Realtime session."""
    from zerg.llm.keys import openai_api_key

    try:
        key = openai_api_key(settings)
    except Exception as exc:  # the key's secret cannot be read (AWS): no voice, said without the secret
        observability.logger().warning("realtime: the OpenAI key could not be read", extra={"reason": type(exc).__name__})
        raise RealtimeUnavailable("voice is unavailable: the OpenAI key could not be read; the browser's speech "
                                  "input still works") from None
    if not key:
        raise RealtimeUnavailable(NO_KEY)
    import openai  # heavy: imported where used

    client = openai.OpenAI(api_key=key, base_url=settings.openai_base_url, max_retries=0, timeout=MINT_TIMEOUT_S)
    try:
        secret = client.realtime.client_secrets.create(
            expires_after={"anchor": "created_at", "seconds": settings.realtime_ttl_s},
            session=session_config(settings),
        )
    except openai.APIStatusError as exc:
        observability.logger().warning("realtime: session refused", extra={"status": exc.status_code})
        raise RealtimeUnavailable(f"voice is unavailable: OpenAI refused the realtime session (HTTP {exc.status_code}); "
                                  "the browser's speech input still works") from None
    except openai.APIError as exc:  # connection errors and timeouts
        observability.logger().warning("realtime: provider unreachable", extra={"reason": type(exc).__name__})
        raise RealtimeUnavailable("voice is unavailable: OpenAI could not be reached; the browser's speech input "
                                  "still works") from None
    value = getattr(secret, "value", None)
    if not isinstance(value, str) or not value or value == key:
        raise RealtimeUnavailable("voice is unavailable: OpenAI answered without a client secret; the browser's "
                                  "speech input still works")
    return {"client_secret": value, "expires_at": int(secret.expires_at), "model": settings.realtime_model,
            "tools": [ROUTE_TOOL]}
