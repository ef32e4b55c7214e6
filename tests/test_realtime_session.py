"""POST /api/jarvis/realtime/session mints an ephemeral OpenAI Realtime secret (against the scripted
server's /v1/realtime/client_secrets) whose one tool is route_to_supervisor(task); the answer carries
the ephemeral secret only, never the server's key; without a key, or with the provider refusing or
down, it is 503 naming what to do."""

from __future__ import annotations

import json
import time

import pytest

from tests.support.api import call, login
from zerg.jarvis import realtime

SESSION = "/api/jarvis/realtime/session"
SERVER_KEY = "sk-server-own-key-never-shown-0123456789"


@pytest.fixture
def token(runtime_env, alice):
    runtime_env(OPENAI_API_KEY=SERVER_KEY, ZERG_REALTIME_MODEL="gpt-realtime-test", ZERG_REALTIME_VOICE="verse",
                ZERG_REALTIME_TTL_S="90")
    return login(alice)


def test_a_session_is_minted_with_the_one_route_tool_and_only_the_ephemeral_secret_comes_back(token, llm):
    started = int(time.time())
    status, body, raw = call("POST", SESSION, token=token)
    assert status == 200, body
    (minted,) = llm.realtime_requests
    assert minted["authorization"] == f"Bearer {SERVER_KEY}"  # the key goes to OpenAI only
    sent = minted["body"]
    assert sent["expires_after"] == {"anchor": "created_at", "seconds": 90}
    session = sent["session"]
    assert (session["type"], session["model"], session["audio"]) == ("realtime", "gpt-realtime-test",
                                                                      {"output": {"voice": "verse"}})
    (tool,) = session["tools"]
    assert tool["type"] == "function" and tool["name"] == "route_to_supervisor"
    assert tool["parameters"]["required"] == ["task"] and tool["parameters"]["properties"]["task"]["type"] == "string"
    assert "route_to_supervisor" in session["instructions"] and "single fact" in session["instructions"]

    assert set(body) == {"client_secret", "expires_at", "model", "tools"}
    assert body["client_secret"].startswith("ek_scripted_") and body["model"] == "gpt-realtime-test"
    assert started + 90 <= body["expires_at"] <= int(time.time()) + 90
    assert body["tools"] == [tool]
    assert SERVER_KEY not in raw["body"] and SERVER_KEY not in json.dumps(raw.get("headers"))
    assert llm.requests == []  # no chat call: minting is not a model call


def test_each_request_mints_a_fresh_secret(token, llm):
    first = call("POST", SESSION, token=token)[1]["client_secret"]
    second = call("POST", SESSION, token=token)[1]["client_secret"]
    assert first != second and len(llm.realtime_requests) == 2


def test_without_an_openai_key_voice_is_503_naming_the_setting(runtime_env, alice, llm):
    runtime_env()  # a keyless endpoint (the scripted server): chat works, voice does not
    status, body, _ = call("POST", SESSION, token=login(alice))
    assert (status, body) == (503, {"error": "unavailable", "message": realtime.NO_KEY})
    assert llm.realtime_requests == []


@pytest.mark.parametrize(("answer", "said"), [
    ({"status": 401, "message": f"Incorrect API key provided: {SERVER_KEY}"}, "refused the realtime session (HTTP 401)"),
    ({"status": 500, "message": "boom"}, "refused the realtime session (HTTP 500)"),
])
def test_a_refusing_provider_is_503_and_never_echoes_the_key(token, llm, answer, said):
    llm.script_realtime(answer)
    status, body, raw = call("POST", SESSION, token=token)
    assert status == 503 and body["error"] == "unavailable" and said in body["message"], body
    assert SERVER_KEY not in raw["body"] and "speech input still works" in body["message"]


def test_an_unreachable_provider_is_503(runtime_env, alice):
    runtime_env(OPENAI_API_KEY=SERVER_KEY, OPENAI_BASE_URL="http://127.0.0.1:9/v1")
    status, body, raw = call("POST", SESSION, token=login(alice))
    assert (status, body["error"]) == (503, "unavailable") and "could not be reached" in body["message"]
    assert SERVER_KEY not in raw["body"]


def test_an_owner_past_the_spending_cap_gets_no_session_429(token, llm, pool, alice):
    from zerg.notify.policy import PolicyChange, set_policy

    with pool.connection() as conn:
        set_policy(conn, alice.owner_id, PolicyChange(daily_usd_cap=0))
    status, body, _ = call("POST", SESSION, token=token)
    assert status == 429 and body["error"] == "spending_cap_reached" and "no voice session" in body["message"]
    assert llm.realtime_requests == []


def test_realtime_needs_a_session(token):
    status, body, _ = call("POST", SESSION)
    assert status == 401 and body["error"] == "unauthorized"


def test_a_bad_voice_setting_is_refused_at_configuration():
    from zerg.config import ConfigError, load_settings

    with pytest.raises(ConfigError, match="ZERG_REALTIME_VOICE"):
        load_settings({"ZERG_REALTIME_VOICE": "alloy; rm -rf"})
    with pytest.raises(ConfigError, match="ZERG_REALTIME_TTL_S"):
        load_settings({"ZERG_REALTIME_TTL_S": "5"})
