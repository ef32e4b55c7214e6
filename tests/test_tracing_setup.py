"""Tracing's switches and pure parts (issue 28 item 2): when it is on, which conventions and content
it records, that nothing of OpenTelemetry is loaded while it is off, the run's derived trace context,
and the waterfall's nesting. The end-to-end trace of a run is tests/test_tracing.py."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from zerg import tracing
from zerg.config import ConfigError, load_settings
from zerg.tracing import setup, waterfall

ROOT = Path(__file__).resolve().parents[1]


def settings(**env: str):
    return load_settings({"HOME": "/nonexistent", **env})


@pytest.mark.parametrize("env, on, stored", [
    ({}, False, False),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True, True),  # local: kept for the waterfall too
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True, True),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "ZERG_STATE_MACHINE_ARN": "arn:aws:states:x"},
     True, False),  # on AWS: exported only
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:4318", "AWS_LAMBDA_FUNCTION_NAME": "zerg-dev-worker"},
     True, False),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "ZERG_TRACE_STORE": "off"}, True, False),
    ({"ZERG_TRACE_STORE": "on"}, True, True),
    ({"ZERG_TRACE_STORE": "ON", "OTEL_SDK_DISABLED": "true"}, False, True),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"}, False, True),
])
def test_tracing_is_on_with_an_endpoint_or_the_span_store_unless_the_sdk_is_disabled(env, on, stored):
    s = settings(**env)
    assert (setup.wanted(s), setup.store_spans(s)) == (on, stored)


def test_zerg_serve_keeps_spans_unless_told_not_to_or_not_local():
    assert setup.store_spans(settings(), serve=True) and setup.wanted(settings()) is False  # not serving here
    assert not setup.store_spans(settings(ZERG_TRACE_STORE="off"), serve=True)
    assert not setup.store_spans(settings(ZERG_STATE_MACHINE_ARN="arn:aws:states:x"), serve=True)
    assert not setup.store_spans(settings(AWS_LAMBDA_FUNCTION_NAME="zerg-dev-worker"), serve=True)
    assert not setup.store_spans(settings(), serve=False)


def test_the_conventions_and_content_capture_follow_the_otel_variables():
    assert setup.options_of(settings()) == tracing.Options(latest=False, capture_content=False)
    latest = setup.options_of(settings(OTEL_SEMCONV_STABILITY_OPT_IN="http, gen_ai_latest_experimental"))
    assert (latest.latest, latest.provider_key, latest.semconv) == (True, "gen_ai.provider.name", "1.41.0")
    assert (tracing.Options().provider_key, tracing.Options().semconv) == ("gen_ai.system", "1.36.0")
    for value, captured in (("true", True), ("SPAN_ONLY", True), ("span_and_event", True), ("false", False),
                            ("event_only", False), ("no_content", False)):
        opts = setup.options_of(settings(OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=value))
        assert opts.capture_content is captured, value
    assert setup.options_of(settings(AWS_LAMBDA_FUNCTION_NAME="zerg-dev-worker")).flush_each_invocation
    assert not setup.options_of(settings()).flush_each_invocation  # locally the batch exports in the background


def test_a_bad_trace_store_value_names_its_variable():
    with pytest.raises(ConfigError, match="ZERG_TRACE_STORE"):
        settings(ZERG_TRACE_STORE="sometimes")


PROBE = """
import json, sys
from zerg.wiring import get_runtime
rt = get_runtime()
rt.llm
import functions.worker.handler, functions.supervisor.handler, zerg.loop.agent_loop, zerg.tracing.steps
print(json.dumps({"otel": sorted({m.split(".")[1] for m in sys.modules if m.startswith("opentelemetry.")}),
                  "active": __import__("zerg.tracing").tracing.active()}))
"""


def _probe(tmp_path, **env: str) -> dict:
    base = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", PROBE], env={**base, **env}, cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_no_opentelemetry_module_is_loaded_while_tracing_is_off(tmp_path):
    # the runtime built, its model made, the handlers, the loop and the step spans imported: nothing of OTel
    assert _probe(tmp_path) == {"otel": [], "active": False}
    # and with an endpoint the SDK and the OTLP exporter are loaded where the runtime is built
    on = _probe(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9")
    assert on["active"] is True and {"sdk", "exporter", "trace"} <= set(on["otel"])


def test_the_runs_trace_context_is_derived_from_the_run():
    created = datetime(2026, 11, 29, 4, 0, tzinfo=timezone.utc)
    trace_id, span_id = tracing.ids_for(7, created)
    assert (trace_id, span_id) == tracing.ids_for(7, created)  # a repeated start: the same input
    assert len(trace_id) == 32 and len(span_id) == 16 and int(trace_id, 16) and int(span_id, 16)
    assert trace_id[:8] == f"{int(created.timestamp()):08x}"  # X-Ray's shape: epoch seconds first
    assert tracing.ids_for(8, created)[0] != trace_id
    assert tracing.ids_for(7, created + timedelta(microseconds=1))[0] != trace_id  # a reused id in another database
    traceparent = f"00-{trace_id}-{span_id}-01"
    assert tracing.trace_id_of(traceparent) == trace_id
    for bad in (None, "", "00-xyz", f"01-{trace_id}-{span_id}-01", f"00-{trace_id.upper()}-{span_id}-01",
                f"00-{trace_id}-{span_id}-01; DROP TABLE runs"):
        assert tracing.trace_id_of(bad) is None, bad


def test_without_tracing_every_helper_is_a_no_op():
    assert not tracing.active() and tracing.traceparent_for({"id": 1, "created_at": datetime.now(timezone.utc)}) is None
    with tracing.invocation("00-" + "a" * 32 + "-" + "b" * 16 + "-01", "x", run_id=1, owner_id=1) as span:
        assert span is None and not tracing.in_run()
        with tracing.span("y") as inner:
            assert inner is None
    tracing.end_run({"id": 1, "owner_id": 1, "created_at": datetime.now(timezone.utc)})  # nothing, no error
    assert tracing.current_trace_id() is None


def test_captured_content_is_cut_and_says_so():
    assert tracing.content("short") == "short"
    long = "x" * (tracing.CONTENT_MAX_CHARS + 5)
    assert tracing.content(long) == "x" * tracing.CONTENT_MAX_CHARS + "… [5 more characters not recorded]"


def _row(span_id, parent, name, start_ms, duration_ms, **attrs):
    start = datetime(2026, 1, 1, tzinfo=timezone.utc) + timedelta(milliseconds=start_ms)
    return {"trace_id": "t" * 32, "span_id": span_id, "parent_span_id": parent, "name": name, "kind": "internal",
            "started_at": start, "duration_ms": duration_ms, "status": "unset", "status_message": None,
            "attributes": attrs}


def test_the_waterfall_nests_spans_and_rolls_tokens_and_cost_up():
    rows = [
        _row("r", None, "invoke_workflow zerg.run", 0, 100),
        _row("a", "r", "invoke_agent worker", 10, 50),
        _row("c1", "a", "chat m", 11, 5, **{"gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 10,
                                             "gen_ai.usage.cache_read.input_tokens": 40, tracing.COST_USD: 0.25}),
        _row("c2", "a", "chat m", 20, 5, **{"gen_ai.usage.input_tokens": 50, "gen_ai.usage.output_tokens": 5,
                                             tracing.COST_USD: 0.5}),
        _row("o", "gone", "invoke_agent supervisor", 5, 200, **{"gen_ai.usage.input_tokens": "not a number"}),
    ]
    tree = waterfall.build(rows)
    assert [s["span_id"] for s in tree["spans"]] == ["r", "o"]  # a span whose parent was not kept stands on top
    root = tree["spans"][0]
    (agent,) = root["children"]
    assert [c["span_id"] for c in agent["children"]] == ["c1", "c2"]
    assert (agent["tokens_in"], agent["tokens_out"], agent["tokens_cached"], agent["cost_usd"]) == (150, 15, 40, 0.75)
    assert (root["tokens_in"], root["cost_usd"]) == (150, 0.75)
    assert tree["spans"][1]["tokens_in"] == 0
    assert tree["duration_ms"] == 205.0 and tree["trace_id"] == "t" * 32
    assert waterfall.build([]) == {"trace_id": None, "started_at": None, "duration_ms": None, "spans": []}


def test_the_ports_stop_reasons_are_named_as_the_genai_conventions_name_them():
    from zerg.llm.port import ChatResult, ToolCall
    from zerg.tracing.model import finish_reasons

    called = ChatResult(model="m", content="", tool_calls=[ToolCall("c1", "clock", "{}")], stop_reason="tool_calls")
    assert finish_reasons(called) == ["tool_call"]
    assert finish_reasons(ChatResult(model="m", content="no", stop_reason="refusal")) == ["content_filter"]
    assert finish_reasons(ChatResult(model="m", content="ok", stop_reason="length")) == ["length"]
