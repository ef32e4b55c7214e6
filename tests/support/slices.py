"""How the suite is sliced (docs/testing.md): the one rule that gives every test its markers, and
the map of which test files cover which package of the core.

Invariants:
- Every marker a test carries comes from :func:`marks_for` (called by ``tests/conftest.py`` at
  collection); a module may add more with ``pytestmark``, never remove one.
- ``db``, ``browser``, ``infra`` and most of ``e2e`` follow from what a test *uses* (its fixtures,
  its directory), so a new test is classified without anyone remembering to. What no fixture shows
  is :data:`LISTED`, with why, and is checked:
  - a test that starts the local engine in its own process without the ``e2e`` mark fails
    (:func:`watch_engine`, the guard in ``tests/conftest.py``): the runtime's run starter behind
    the API, the ingress or a schedule fire is a way to the engine no fixture name shows;
  - a test file whose text mentions a way the guard cannot see (:data:`E2E_SIGNS`: a ``zerg run``
    or ``zerg serve`` process, ``./dev.sh``) is in :data:`LISTED` or :data:`NOT_E2E`, and every
    entry of both names a file and test that exist (``tests/test_markers.py``).
- ``slow`` is measured, not derived: a test whose call took over :data:`SLOW_S` under ``-n 2``
  (docs/testing.md says how to measure again).
- The package table in docs/testing.md is :func:`table` of the test files' own imports; after a
  package is renamed or a test file added, ``python -m tests.support.slices --write`` rewrites it.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
ZERG = ROOT / "layers" / "core" / "python" / "zerg"
DOC = ROOT / "docs" / "testing.md"

# A test whose fixtures (with what they depend on) include one of these talks to a PostgreSQL ...
DB_FIXTURES = frozenset({"admin_url", "make_database", "database_url", "pg16"})
# ... drives the end-to-end engine: the local engine (the real ASL under moto's interpreter) or
# ``zerg serve`` as its own process (the browser tests') ...
E2E_FIXTURES = frozenset({"engine", "served"})
# ... drives headless Chromium ...
BROWSER_FIXTURES = frozenset({"chromium", "open_page"})
# ... is slow: the fixture alone takes longer than SLOW_S (it is set up once per module, and
# deselecting only the first test would hand its cost to the next).
SLOW_FIXTURES = {"crowded": "test_memory_vectors.py: 1,000+ vectors written once per module (14 s)"}

# Ways to the end-to-end engine that no fixture shows and the guard cannot see: ``zerg run`` or
# ``zerg serve`` as a process, ``./dev.sh``; building a LocalEngine or a LocalStarter. A test file
# whose text matches is in LISTED (as a file or by its tests) or in NOT_E2E.
E2E_SIGNS = re.compile(r"LocalEngine|LocalStarter|zerg\.local\.engine|tests\.support\.serve|\bServed\b|"
                       r"dev\.sh|[\"']zerg\.cli(?:\.main)?[\"']|bin/zerg")

SLOW_S = 5.0  # a test's call phase above this (--durations=0, -n 2, shared 2-core machine) is slow

# What no fixture shows, one entry per test file ("file"), test ("file::function", every
# parameter case) or case ("file::function[id]"), paths relative to tests/: the marks it adds
# ("e2e", "db", "browser", "slow", space-separated) and why. Measured with a full run under -n 2.
LISTED: dict[str, tuple[str, str]] = {
    # -- the local engine started in-process without the engine fixture (the runtime's run
    #    starter behind the API, the ingress, a schedule fire or an escalation; or built directly)
    "test_local_engine.py": ("e2e", "the engine itself"),
    "test_engine_callback.py": ("e2e", "the engine itself: callback tasks (.waitForTaskToken)"),
    "test_approval_wait.py": ("e2e", "runs started through the runtime's run starter, waiting on approvals"),
    "test_approval_answers.py": ("e2e", "runs started through the runtime's run starter, answered through the API"),
    "test_approval_push.py": ("e2e", "runs started through the runtime's run starter, their approvals pushed"),
    "test_api_fuzz.py": ("e2e slow", "every operation against zerg serve, runs included (87 s)"),
    "test_replies_end_to_end.py": ("e2e", "mail and SMS through the ingress to runs and escalations"),
    **{f"test_api.py::{t}": ("e2e", "POST /api/jarvis/runs starts the run on the local engine") for t in (
        "test_full_flow_auth_start_stream_and_details", "test_reconnecting_with_last_event_id_loses_and_duplicates_nothing",
        "test_idempotency_key_replay_returns_the_same_run_and_starts_one_execution",
        "test_two_owners_cannot_see_each_others_anything",
        "test_lambda_mode_events_long_poll_parsed_by_an_sse_client_gives_the_same_events",
        "test_cancel_stops_the_run_and_its_unfinished_jobs", "test_bad_input_gets_precise_json_errors",
        "test_zerg_ask_follows_the_stream_and_prints_the_answer",
        "test_a_failed_start_frees_the_idempotency_key_so_the_retry_starts_a_new_run",
        "test_a_replay_starts_the_execution_the_first_attempt_never_started",
        "test_bob_and_alice_are_isolated_both_ways_including_the_lambda_events_path")},
    **{f"test_bench.py::test_benchmark_smoke_run_prints_its_figures[{b}]": ("e2e", "the benchmark runs a run")
       for b in ("run", "context", "schedules", "approvals")},
    "test_api_security.py::test_refused_requests_change_nothing_and_the_same_requests_from_the_app_do":
        ("e2e", "the app's own retry starts a run on the local engine"),
    "test_cancel.py::test_cancel_during_a_sandboxed_sleep_60_kills_it_before_the_terminal_event_and_queued_jobs_never_start":
        ("e2e", "the cancelled run runs on the local engine"),
    **{f"test_cli_login.py::{t}": ("e2e", "zerg ask starts a run on the in-process server") for t in (
        "test_login_keeps_the_token_in_a_0600_file_and_ask_uses_it_with_no_secret_in_any_argv",
        "test_ask_with_the_secret_from_the_environment_keeps_it_off_argv_and_revokes_its_own_session")},
    **{f"test_escalation.py::{t}": ("e2e", "the escalation state machine on the local engine") for t in (
        "test_repeats_stop_at_the_maximum_on_every_critical_channel",
        "test_repeats_follow_the_schedules_critical_channel_override",
        "test_a_second_start_for_the_same_run_starts_nothing_and_zero_repeats_start_none",
        "test_another_owner_can_neither_stop_nor_drive_an_escalation",
        "test_a_repeat_step_that_is_not_due_sends_nothing_and_keeps_waiting",
        "test_zerg_serve_resumes_an_escalation_whose_process_stopped")},
    **{f"test_escalation_machine.py::{t}[local]": ("e2e", "the escalation ASL on the local engine") for t in (
        "test_the_escalation_repeats_until_the_function_says_done",
        "test_a_failing_repeat_step_is_recorded_failed_before_the_execution_fails",
        "test_stopping_a_waiting_escalation_aborts_it_before_any_repeat")},
    **{f"test_escalation_matrix.py::{t}": ("e2e", "a critical alert starts its escalation on the local engine") for t in (
        "test_critical_goes_to_every_channel_and_starts_the_escalation", "test_an_unverified_contact_is_refused")},
    **{f"test_inbound_cli.py::{t}": ("e2e", "the message starts a run on the local engine") for t in (
        "test_an_email_file_from_the_owner_starts_a_run_and_prints_its_answer",
        "test_an_sms_from_the_owners_number_starts_a_run_and_prints_its_answer",
        "test_the_same_sms_id_twice_is_one_message_and_one_run")},
    **{f"test_inbound_ingress.py::{t}": ("e2e", "the ingress starts a run on the local engine") for t in (
        "test_an_ses_event_reads_the_stored_mail_and_starts_one_run_even_when_delivered_twice",
        "test_an_sns_delivery_of_two_way_sms_goes_through_the_same_pipeline_once")},
    **{f"test_inbound_local_inbox.py::{t}": ("e2e", "the dropped file starts a run on the local engine") for t in (
        "test_a_dropped_sms_from_the_owner_starts_a_run_and_moves_to_processed",
        "test_the_same_file_dropped_twice_is_one_message_and_one_run",
        "test_a_stop_between_the_pipeline_and_the_move_redelivers_the_file_as_the_same_message")},
    **{f"test_orphans.py::{t}": ("e2e", "closes runs of a LocalStarter's engine") for t in (
        "test_closing_the_local_starter_interrupts_the_runs_it_still_executed",
        "test_a_run_whose_local_execution_was_aborted_is_closed_as_the_aws_rule_closes_one")},
    "test_push.py::test_each_repeat_of_a_critical_alert_is_pushed_too": ("e2e", "the escalation on the local engine"),
    "test_quick.py::test_a_later_supervisor_run_sees_the_quick_turn_on_the_thread": ("e2e", "a run on the local engine"),
    **{f"test_replies.py::{t}": ("e2e", "the reply starts a run or stops an escalation on the local engine") for t in (
        "test_a_reply_starts_a_run_that_sees_what_it_answers_and_its_answer_comes_back_threaded_to_that_contact",
        "test_an_sms_reply_is_answered_by_sms_to_that_number_cut_with_the_runs_link",
        "test_the_same_message_delivered_twice_starts_one_run",
        "test_an_sms_ack_to_a_critical_alert_stops_its_escalation_and_is_confirmed_to_that_number")},
    **{f"test_request_contract.py::{t}": ("e2e", "POST /api/jarvis/runs starts the run on the local engine") for t in (
        "test_context_and_preferences_are_kept_on_the_run_and_a_replay_answers_the_same_run",
        "test_a_run_without_context_or_preferences_keeps_none",
        "test_the_202_carries_the_estimate_from_history_and_the_default_from_its_setting",
        "test_a_timed_out_worker_is_retried_as_a_new_run_of_its_task")},
    "test_run_e2e.py::test_a_worker_crash_fails_that_job_and_the_run_still_answers": ("e2e", "its own LocalEngine"),
    **{f"test_idle_schedules.py::{t}": ("e2e", "the fire starts a run on the local engine") for t in (
        "test_an_acknowledged_or_opened_result_keeps_the_schedule_firing",
        "test_a_schedule_with_no_results_or_with_idle_pause_off_is_never_paused")},
    **{f"test_run_budgets.py::{t}": ("e2e", "the fire starts a run on the local engine") for t in (
        "test_a_scheduled_run_stops_at_its_per_fire_budget_with_a_partial_answer_and_the_next_fire_is_skipped",)},
    **{f"test_schedule_fire.py::{t}": ("e2e", "the fire starts a run on the local engine") for t in (
        "test_a_scheduler_event_starts_a_run_with_trigger_schedule_that_runs_to_success",
        "test_a_duplicate_delivery_of_the_same_scheduled_time_starts_nothing",
        "test_a_fire_while_the_previous_run_is_still_running_is_skipped_and_recorded",
        "test_a_retried_delivery_after_a_crash_between_the_run_row_and_its_execution_starts_that_same_run",
        "test_a_schedules_fires_and_the_schedule_of_a_run_are_its_owners_alone",
        "test_run_now_fires_the_schedule_as_the_ticker_would_waits_for_the_run_and_prints_its_answer",
        "test_another_owner_can_neither_see_the_history_of_a_schedule_nor_fire_it",
        "test_the_housekeeping_event_schedules_finishes_a_fire_its_process_left_pending",
        "test_a_schedule_whose_previous_run_never_started_is_not_skipped_forever",
        "test_a_run_that_never_started_and_cannot_start_lets_the_next_fire_start_a_new_run")},
    **{f"test_ticker.py::{t}": ("e2e", "the ticker fires runs on the local engine") for t in (
        "test_a_due_schedule_fired_by_zerg_serves_ticker_runs_the_run_state_machine_and_lands_in_the_inbox_with_severity",
        "test_after_downtime_only_the_latest_missed_fire_runs_and_the_passed_over_ones_are_recorded",
        "test_a_ticker_that_read_the_row_before_another_fired_it_starts_nothing",
        "test_two_tickers_at_once_on_one_database_start_one_run",
        "test_a_one_off_at_schedule_fires_once_then_has_no_next_fire",
        "test_the_ticker_completes_a_fire_whose_process_stopped_between_the_run_row_and_its_execution",
        "test_one_schedule_that_fails_to_fire_does_not_stop_the_others")},
    # -- zerg run, zerg serve or ./dev.sh as processes
    "test_cli_sandbox.py": ("e2e", "zerg run as a process"),
    "test_serve_first_start.py": ("e2e", "zerg serve as a process"),
    "browser/test_bench_web.py": ("e2e slow", "./dev.sh web, then zerg serve as a process (6 s)"),
    "test_bench.py::test_benchmark_smoke_run_prints_its_figures[cli]": ("e2e slow", "zerg run in a process (9 s)"),
    "test_bench.py::test_benchmark_smoke_run_prints_its_figures[bigoutput]": ("e2e", "zerg serve in a process"),
    "test_bench.py::test_benchmark_smoke_run_prints_its_figures[web]":
        ("e2e browser slow", "./dev.sh web, zerg serve as a process, the page in Chromium (9 s)"),
    "test_housekeeping.py::test_zerg_serve_deletes_an_old_unpinned_worker_at_start_and_keeps_a_cited_one":
        ("e2e", "zerg serve as a process"),
    **{f"test_offline_and_cli_run.py::{t}": ("e2e", "zerg run as a process") for t in (
        "test_zerg_run_offline_notes_what_to_remember_and_writes_the_episode_before_it_exits",
        "test_zerg_run_refuses_an_empty_or_huge_task",
        "test_zerg_run_with_a_state_machine_arn_says_why_it_cannot_run_and_starts_nothing")},
    **{f"test_offline_and_cli_run.py::{t}": ("e2e slow", f"zerg run as a process ({s})") for t, s in (
        ("test_zerg_run_offline_completes_and_leaves_the_artifact_tree", "10 s"),
        ("test_zerg_run_acts_for_the_owner_named_and_refuses_an_unknown_one", "12 s"))},
    "test_orphans.py::test_ctrl_c_on_zerg_run_cancels_its_run_and_says_so": ("e2e", "zerg run as a process"),
    **{f"test_orphans.py::{t}": ("e2e slow", "zerg serve / zerg run as processes, killed (7 s)") for t in (
        "test_kill_9_of_zerg_serve_mid_run_leaves_an_interrupted_run_with_its_evidence_after_restart",
        "test_zerg_run_recovers_what_a_killed_zerg_run_left_before_it_runs")},
    # -- a PostgreSQL of the test's own (pg_ctl, the embedded server), no fixture's
    "test_db_outage.py": ("db", "stops and restarts a PostgreSQL of its own"),
    "test_db_upgrade.py": ("db", "PostgreSQL 16 and 18 data dirs of its own"),
    "test_worker_index.py::test_db_stop_stops_the_embedded_server_and_keeps_its_data": ("db", "zerg db migrate/stop"),
    "test_hosts.py::test_hosts_routes_need_a_session_before_anything_else":
        ("db", "the API starts an embedded PostgreSQL in the test's data dir before it answers 401"),
    # -- slow, nothing else to say (the call phase, measured)
    "test_memory_vectors.py::test_on_aws_the_embed_housekeeping_event_embeds_what_is_stale_and_starts_nothing_near_the_timeout":
        ("slow", "161 s: embeds what is stale in the whole session database"),
    "test_memory_vectors.py::test_the_sweep_works_off_a_backlog_bigger_than_one_pass":
        ("slow", "57 s: sweeps what is stale in the whole session database"),
    "test_bench.py::test_benchmark_smoke_run_prints_its_figures[imports]": ("slow", "builds and installs the layer (19 s)"),
    "test_bench.py::test_benchmark_smoke_run_prints_its_figures[memory_quality]":
        ("slow", "embeds 6 files and their ~40 chunks with the local model (10 s)"),
    "test_embeddings.py::test_local_minilm_matches_sentence_transformers_on_every_reference_text": ("slow", "9 s"),
    "browser/test_jarvis_web.py::test_a_dropped_event_stream_shows_reconnecting_then_continues_without_loss": ("slow", "7 s"),
    "browser/test_dashboard.py::test_a_second_owner_signed_in_sees_none_of_the_first_owners_things": ("slow", "7 s"),
    "browser/test_axe.py::test_axe_finds_nothing_critical_or_serious_on_any_page":
        ("slow", "16 pages, axe-core on each (10-15 s per colour scheme)"),
    "test_run_deadline.py::test_at_the_deadline_the_slow_worker_is_cancelled_and_the_answer_says_so": ("slow", "6 s"),
    "test_sandbox.py::test_two_owners_calls_at_the_same_time_cannot_list_read_or_signal_each_other": ("slow", "6 s"),
    "test_tools.py::test_a_timed_out_ssh_exec_ends_the_remote_command_and_its_children_before_returning": ("slow", "5 s"),
    "test_sandbox_lambda.py::test_without_the_lambda_runtime_variables_the_sweep_kills_only_marked_processes":
        ("slow", "5 s"),
    "test_escalation.py::test_a_critical_alert_repeats_on_the_escalation_state_machine_and_stops_after_acknowledgement":
        ("e2e slow", "the escalation state machine on the local engine (5 s)"),
    "test_owner_feed.py::test_a_live_feed_ends_when_its_session_is_revoked": ("slow", "5 s"),
    "test_mcp_server.py": ("e2e", "zerg mcp serve as a process (its own local engine), and runs behind POST /mcp"),
    "test_mcp_server.py::test_zerg_mcp_serve_answers_ask_over_stdio_with_progress_notifications":
        ("e2e slow", "zerg mcp serve as a process running a whole run (9 s)"),
    "test_mcp_server.py::test_zerg_mcp_serve_reads_and_writes_memory_as_the_owner_and_refuses_bad_input":
        ("e2e slow", "zerg mcp serve as a process: the whole stack's imports (4-10 s)"),
    "test_mcp_server.py::test_zerg_mcp_serve_keeps_stdout_for_the_protocol_and_exits_when_stdin_closes":
        ("e2e slow", "zerg mcp serve as a process: the whole stack's imports (5-7 s)"),
    # MCP stdio servers from PyPI start a Python with the SDK in the sandbox (~5 s each under load)
    "test_mcp_client.py::test_a_worker_run_calls_mcp_server_time_and_waits_for_approval_of_a_non_read_only_tool":
        ("e2e slow", "a run on the local engine; mcp-server-time started twice (15 s)"),
    "test_mcp_client.py::test_where_the_api_cannot_open_the_secret_the_put_answers_and_the_next_worker_lists_the_tools":
        ("e2e", "a run on the local engine whose worker lists the server the API could not"),
    **{f"test_mcp_client.py::{t}": ("slow", s) for t, s in (
        ("test_mcp_server_time_from_pypi_is_listed_and_called_in_the_sandbox", "mcp-server-time started twice (16 s)"),
        ("test_mcp_server_git_on_a_scratch_repository_and_the_policy_per_tool", "mcp-server-git started twice (28 s)"),
        ("test_the_cli_adds_lists_and_removes_and_reads_the_token_from_a_file", "mcp-server-time started once (8 s)"))},
    "test_bench.py::test_benchmark_smoke_run_prints_its_figures[mcp]": ("slow", "mcp-server-time started 7 times (40 s)"),
    "browser/test_mcp_web.py::test_the_owner_registers_mcp_server_time_and_sees_its_tools":
        ("slow", "mcp-server-time started twice by zerg serve (12 s)"),
}

# Test files that match E2E_SIGNS without driving the engine in any test LISTED does not name, and why.
NOT_E2E: dict[str, str] = {
    "test_embeddings.py": "reads dev.sh for the weights' pin",
    "test_layer.py": "names zerg.cli among the modules the Lambda layer must not load",
    "test_local_exit.py": "dispatches through a LocalEngine it never starts",
    "test_sandbox_lambda.py": "a subprocess dispatches one handler through a LocalEngine it never starts",
    "test_memory_cli.py": "zerg memory as a process: no run",
    "test_owner_data.py": "zerg owners as a process: no run",
    "test_sessions.py": "zerg owners as a process: no run",
    "test_worker_index.py": "zerg db and zerg workers as processes: no run",
    "test_escalation_machine.py": "its [aws] cases run the ASL on moto's Step Functions, not the local engine",
    "test_run_e2e.py": "the handler's input checks and the closing races need no engine",
    "test_markers.py": "checks these rules and the guard",
}


# Tests that start Playwright's sync API themselves (bench.web, in-process). Playwright allows one
# per thread, and the browser tests' session-scoped Chromium holds it from its first test to the
# end of the process: these fail after it. The collection hook puts them first, and xdist hands
# out the first items first (to one worker, in order), so they run before it in any slice.
RUN_FIRST = ("browser/test_bench_web.py::test_bench_web_smoke_run_prints_its_figures",
             "test_bench.py::test_benchmark_smoke_run_prints_its_figures[web]")


def relative(path: Path) -> str:
    """A test file's path relative to tests/, with forward slashes (the maps' keys)."""
    return path.resolve().relative_to(TESTS).as_posix()


def marks_for(path: Path, name: str, fixturenames: Iterable[str]) -> set[str]:
    """The markers of the test ``name`` (its node name, ``function[id]`` when parametrized) in
    ``path``, whose fixture closure is ``fixturenames``."""
    rel = relative(path) if path.resolve().is_relative_to(TESTS) else path.as_posix()
    fixtures, marks = set(fixturenames), set()
    if fixtures & DB_FIXTURES:
        marks.add("db")
    if rel.startswith("browser/") or fixtures & BROWSER_FIXTURES:
        marks.add("browser")
    if rel.startswith("infra/"):
        marks.add("infra")
    if fixtures & E2E_FIXTURES:
        marks.add("e2e")
    if fixtures & set(SLOW_FIXTURES):
        marks.add("slow")
    for key in (rel, f"{rel}::{name.split('[')[0]}", f"{rel}::{name}"):
        if key in LISTED:
            marks |= set(LISTED[key][0].split())
    return marks


def runs_first(path: Path, name: str) -> bool:
    return path.resolve().is_relative_to(TESTS) and f"{relative(path)}::{name}" in RUN_FIRST


# -- the guard: an in-process engine start is an e2e test -------------------------------------------

_starts: list[None] = []  # one item per start (list.append is atomic across the engine's threads)


def watch_engine() -> bool:
    """Count every ``LocalEngine.start`` of this process (:func:`engine_starts`); False when the
    local engine cannot be found (moved: update this function)."""
    try:
        from zerg.local.engine import LocalEngine
    except ImportError:
        return False
    real = LocalEngine.start
    if getattr(real, "counted_by_slices", False):
        return True

    @functools.wraps(real)
    def start(self, *args, **kwargs):
        _starts.append(None)
        return real(self, *args, **kwargs)

    start.counted_by_slices = True
    LocalEngine.start = start
    return True


def engine_is_watched() -> bool:
    """The guard is armed: ``LocalEngine.start`` is the counting one."""
    from zerg.local.engine import LocalEngine

    return getattr(LocalEngine.start, "counted_by_slices", False)


def engine_starts() -> int:
    return len(_starts)


def unmarked_engine_start(nodeid: str) -> str:
    """What a test that started the local engine without the e2e mark fails with."""
    rel, _, name = nodeid.removeprefix("tests/").partition("::")
    return (f"{nodeid} started the local engine but is not marked e2e: add\n"
            f'    "{rel}::{name}": ("e2e", "<how it reaches the engine>"),\n'
            f"to LISTED in tests/support/slices.py (or take the engine fixture, or pytestmark = pytest.mark.e2e);"
            f" docs/testing.md says why")


# -- the package table -----------------------------------------------------------------------------

BEGIN, END = "<!-- slices:begin (python -m tests.support.slices --write) -->", "<!-- slices:end -->"


def test_files() -> list[Path]:
    return sorted(TESTS.rglob("test_*.py"))


def packages() -> list[str]:
    """The core's top-level packages and modules, as ``zerg.name``."""
    names = {p.stem for p in ZERG.glob("*.py") if p.stem != "__init__"}
    names |= {p.name for p in ZERG.iterdir() if (p / "__init__.py").is_file()}
    return sorted(f"zerg.{n}" for n in names)


def imported(path: Path, known: set[str]) -> set[str]:
    """The core packages (of ``known``) a test file imports, at module level or inside functions."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for module in modules:
            top = ".".join(module.split(".")[:2])
            if top in known:
                found.add(top)
    return found


def coverage() -> dict[str, list[str]]:
    """Each core package -> the test files (relative to tests/) that import it."""
    known = set(packages())
    covered: dict[str, list[str]] = {name: [] for name in sorted(known)}
    for path in test_files():
        for name in imported(path, known):
            covered[name].append(relative(path))
    return covered


def table() -> str:
    """The markdown table of docs/testing.md: package, how many files, the files (under tests/)."""
    lines = ["| package | files | the test files that import it (under `tests/`) |", "|---|---|---|"]
    for name, files in coverage().items():
        lines.append(f"| `{name}` | {len(files)} | {', '.join(files) or '—'} |")
    return "\n".join(lines)


def documented() -> str | None:
    """The table as docs/testing.md has it (between the BEGIN and END lines), or None."""
    text = DOC.read_text() if DOC.is_file() else ""
    if BEGIN not in text or END not in text:
        return None
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip()


def write() -> None:
    """Rewrite the table in docs/testing.md from the test files' imports."""
    text = DOC.read_text()
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    DOC.write_text(f"{head}{BEGIN}\n{table()}\n{END}{tail}")


def main(args: list[str]) -> int:
    if args == ["--write"]:
        write()
        print(f"wrote the package table of {DOC.relative_to(ROOT)}")
    elif not args:
        print(table())
    elif len(args) == 1 and not args[0].startswith("-"):
        name = args[0] if args[0].startswith("zerg.") else f"zerg.{args[0]}"
        files = coverage().get(name)
        if files is None:
            print(f"no core package {name}; there are: {' '.join(packages())}", file=sys.stderr)
            return 2
        print(" ".join(f"tests/{f}" for f in files))
    else:
        print("usage: python -m tests.support.slices [--write | PACKAGE]\n"
              "  the package table of docs/testing.md; --write rewrites it there;\n"
              "  PACKAGE (zerg.memory or memory): its test files, for ./dev.sh test $(...)", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
