"""The ``zerg`` command: operator entry points on the same core library the Lambdas use."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from functools import partial

import zerg.local  # noqa: F401  the local host: gives the composition root its run starter
from zerg.config import ConfigError, get_settings
from zerg.validation import problems
from zerg.wiring import get_runtime, make_scheduler, make_sealer, make_store


class CliError(RuntimeError):
    """An operator-facing failure: printed as one line, exit status 2."""


def _connection():
    from zerg.db import get_pool

    return get_pool().connection()


def cmd_db_migrate(args: argparse.Namespace) -> int:
    from zerg.migrate import migrate, status

    with _connection() as conn:
        applied = migrate(conn)
        st = status(conn)
    for m in applied:
        print(f"applied {m.version:04d}_{m.name}")
        for note in m.notes:  # what it did to existing rows, one line each
            print(f"  {note}")
    print(f"database at schema version {st.current} (latest {st.latest})"
          + ("" if applied else ": up to date"))
    return 0


def cmd_db_status(args: argparse.Namespace) -> int:
    from zerg.db import database_url, server_info
    from zerg.migrate import status

    settings = get_settings()
    where = "DATABASE_URL" if settings.database_url else f"embedded ({settings.data_dir / 'pg'})"
    with _connection() as conn:
        st = status(conn)
        server = server_info(conn)
    database_url(settings)  # resolves (and starts) the server; never printed: it may hold a password
    print(f"database: {where}, PostgreSQL {server['server_version']}")
    print(f"schema version: {st.current} of {st.latest}")
    for m in st.pending:
        print(f"pending: {m.version:04d}_{m.name}")
    print(f"pgvector: {server['pgvector'] or 'not installed (run zerg db migrate)'}")
    return 0 if not st.pending else 1


def cmd_db_stop(args: argparse.Namespace) -> int:
    from zerg.db import stop_embedded

    settings = get_settings()
    if settings.database_url:
        raise CliError("DATABASE_URL is set: that server is not Zerg's to stop")
    print(stop_embedded(settings.data_dir, force=args.force))
    return 0


def cmd_db_upgrade(args: argparse.Namespace) -> int:
    from zerg.local.pg_upgrade import UpgradeError, upgrade

    settings = get_settings()
    if settings.database_url or settings.db_secret_arn:
        raise CliError(f"DATABASE_URL is set: zerg db upgrade works only on the embedded database "
                       f"({settings.data_dir / 'pg'}); unset DATABASE_URL to upgrade it")
    try:
        print(upgrade(settings.data_dir))
    except UpgradeError as exc:
        raise CliError(str(exc)) from None
    return 0


def _host_key_line(args: argparse.Namespace) -> str:
    """The pin from --host-key, --host-key-file or (explicitly asked: trust on first use) a scan."""
    from zerg.hosts.spec import HostInputError, scan_host_key

    if args.host_key_file:
        try:
            with open(args.host_key_file) as fh:
                return fh.read()
        except OSError as exc:
            raise CliError(f"--host-key-file {args.host_key_file}: {exc.strerror}") from None
    if args.scan_host_key:
        try:
            pin = scan_host_key(args.hostname, args.port)
        except HostInputError as exc:
            raise CliError(str(exc)) from None
        print(f"pinned the key {args.hostname}:{args.port} presents now: {pin.key_type} {pin.fingerprint} "
              "(compare: ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub on the server)")
        return pin.line
    return args.host_key


def cmd_hosts_add(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from zerg.hosts import registry
    from zerg.hosts.spec import HostInputError, HostSpec, check_alias
    from zerg.migrate import migrate
    from zerg.sealing import SealError

    try:
        check_alias(args.alias)
        with open(args.key_file) as fh:  # the key from a file, never from the command line
            private_key = fh.read(64_000)
    except HostInputError as exc:
        raise CliError(f"alias {args.alias!r}: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"--key-file {args.key_file}: {getattr(exc, 'strerror', None) or 'not a text key file'}") from None
    host_key = _host_key_line(args)
    try:
        spec = HostSpec(hostname=args.hostname, port=args.port, user=args.user, private_key=private_key, host_key=host_key)
    except ValidationError as exc:  # messages name the field and the rule, never the value
        raise CliError(problems(exc.errors(), "host")) from None
    try:
        with _connection() as conn:
            migrate(conn)
            owner_id = _owner(conn, args.owner)
            host, created = registry.put_host(conn, make_sealer(), owner_id, args.alias, spec, replace=args.replace)
    except registry.HostExists as exc:
        raise CliError(f"{exc}: zerg hosts add --replace ...") from None
    except SealError as exc:
        raise CliError(f"cannot seal the private key: {exc}") from None
    print(f"{'added' if created else 'replaced'} ssh host {host.alias}: {host.user}@{host.hostname}:{host.port}")
    print(f"  key {host.key_type} {host.key_fingerprint} (sealed; never shown again), host key {host.host_key_fingerprint}")
    return 0


def cmd_hosts_list(args: argparse.Namespace) -> int:
    from zerg.hosts import registry
    from zerg.migrate import migrate

    with _connection() as conn:
        migrate(conn)
        hosts = registry.list_hosts(conn, get_settings(), _owner(conn, args.owner))
    if not hosts:
        print("no ssh hosts (zerg hosts add ALIAS --hostname H --user U --key-file F --host-key 'ssh-ed25519 AAAA...')")
    for h in hosts:
        key = f"{h.key_type} {h.key_fingerprint}" if h.key_fingerprint else "key from ZERG_SSH_HOSTS"
        print(f"{h.alias}\t{h.user}@{h.hostname}:{h.port}\t{key}\thost key {h.host_key_fingerprint or 'from known_hosts'}"
              f"\t{h.source}")
    return 0


def cmd_hosts_rm(args: argparse.Namespace) -> int:
    from zerg.hosts import registry
    from zerg.migrate import migrate

    with _connection() as conn:
        migrate(conn)
        try:
            registry.remove_host(conn, get_settings(), _owner(conn, args.owner), args.alias)
        except (registry.HostNotFound, registry.BootstrapHost) as exc:
            raise CliError(str(exc)) from None
    print(f"removed ssh host {args.alias} and its sealed key")
    return 0


def cmd_workers_reindex(args: argparse.Namespace) -> int:
    from zerg.runs.jobs import reindex

    store = make_store()
    with _connection() as conn:
        report = reindex(conn, store)
    print(f"scanned {report.scanned} workers in {store!r}; indexed {report.indexed}")
    for worker_id, why in report.skipped:
        print(f"skipped {worker_id}: {why}")
    return 0 if not report.skipped else 1


def cmd_workers_gc(args: argparse.Namespace) -> int:
    from zerg.db import get_pool
    from zerg.migrate import migrate
    from zerg.workers.retention import sweep

    days = args.days or get_settings().artifact_retention_days
    if days is None:
        raise CliError("ZERG_ARTIFACT_RETENTION_DAYS is unset, so workers are kept forever: set it or pass --days N")
    owner_id = None
    with _connection() as conn:
        migrate(conn)
        if args.owner is not None:
            owner_id = _owner(conn, args.owner)
    report = sweep(get_pool(), make_store(), days=days, owner_id=owner_id, dry_run=args.dry_run)
    print("\n".join(report.lines()))
    return 0 if not report.failed else 1


def _owner(conn, name: str | None) -> int:
    """The owner a command acts for: ``--owner NAME``, else the local owner (created on first use)."""
    from zerg.owners import local_owner, owner_by_name

    if name is None:
        return local_owner(conn)
    owner_id = owner_by_name(conn, name)
    if owner_id is None:
        raise CliError(f"no owner named {name!r} (zerg owners add NAME creates one)")
    return owner_id


def _add_owner_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--owner", metavar="NAME", help="act for this owner (default: the local owner)")


def cmd_run(args: argparse.Namespace) -> int:
    from zerg import observability
    from zerg.local.run import print_report, run_task
    from zerg.migrate import migrate

    task = " ".join(args.task).strip()
    if not task:
        raise CliError("give a task, e.g. zerg run \"check disk and memory on this machine\"")
    if len(task) > 8192:
        raise CliError(f"the task is {len(task)} characters; the limit is 8192")
    if not args.verbose:  # the handlers' log lines are for operators, not this terminal
        observability.set_level("WARNING")
    rt = get_runtime()
    from zerg.local.engine import prewarm
    from zerg.sandbox import announce

    announce(rt.settings)  # a crash's sandboxes go; no isolation here is said once, loudly

    prewarm(cache_dir=rt.settings.data_dir / "cache")  # moto's imports overlap the database work below
    with rt.pool.connection() as conn:
        migrate(conn)
        owner_id = _owner(conn, args.owner)
    _reap_orphans(rt)
    try:
        report = run_task(rt, task, owner_id=owner_id)
        print_report(rt, report, owner_id)
        # The Remember step runs on after the answer: say why we wait; Ctrl-C skips it.
        rt.starter.finish_background(lambda line: print(line, file=sys.stderr, flush=True))
    finally:
        rt.close()
    if report.interrupted:
        return 130
    return 0 if report.status == "success" else 1


def _reap_orphans(rt) -> None:
    """Close what a killed zerg process left running (see zerg.runs.orphans), and say so."""
    from zerg.runs.orphans import reap_orphans

    for line in reap_orphans(rt).lines():
        print(f"  ({line})", flush=True)


def cmd_owners_add(args: argparse.Namespace) -> int:
    from zerg.identity.names import InvalidName
    from zerg.migrate import migrate
    from zerg.owners import create_owner

    with _connection() as conn:
        migrate(conn)
        try:
            owner = create_owner(conn, args.name)
        except InvalidName as exc:
            raise CliError(str(exc)) from None
    print(f"owner {owner.owner_id} ({owner.name}) created")
    print(f"device secret (shown once, store it now): {owner.device_secret}")
    return 0


def _named_owner(conn, name: str) -> int:
    from zerg.migrate import migrate

    migrate(conn)
    return _owner(conn, name)


def cmd_owners_rotate(args: argparse.Namespace) -> int:
    from zerg.identity import devices
    from zerg.identity.names import InvalidName

    with _connection() as conn:
        try:
            rotation = devices.rotate(conn, _named_owner(conn, args.name), args.device)
        except (devices.DeviceNotFound, InvalidName) as exc:
            raise CliError(f"{args.name}: {exc}") from None
    print(f"revoked: {', '.join(rotation.revoked) or 'no live device'} "
          f"(and {rotation.sessions_revoked} live session(s) issued under them)")
    print(f"new device secret for {rotation.new.name!r} (shown once, store it now): {rotation.new.secret}")
    return 0


def cmd_owners_pair(args: argparse.Namespace) -> int:
    from datetime import timedelta

    from zerg.identity import pairing

    with _connection() as conn:
        try:
            code = pairing.create_code(conn, _named_owner(conn, args.name), timedelta(minutes=args.minutes))
        except (pairing.TooManyCodes, ValueError) as exc:
            raise CliError(str(exc)) from None
    print(f"pairing code: {code.code}")
    print(f"valid once, until {code.expires_at:%H:%M:%S} UTC: on the new device, POST /api/jarvis/pair "
          "{code, device_name} returns its own device secret")
    return 0


def cmd_owners_export(args: argparse.Namespace) -> int:
    from pathlib import Path

    from zerg.db import get_pool
    from zerg.migrate import migrate
    from zerg.privacy.export import ExportError, default_filename, export_owner

    with _connection() as conn:
        migrate(conn)
        owner_id = _owner(conn, args.name)
    try:
        report = export_owner(get_pool(), make_store(), owner_id, Path(args.output or default_filename(args.name)))
    except ExportError as exc:
        raise CliError(str(exc)) from None
    print("\n".join(report.lines()))
    return 0


def cmd_owners_delete(args: argparse.Namespace) -> int:
    from zerg.db import get_pool
    from zerg.migrate import migrate
    from zerg.privacy.delete import DeleteRefused, delete_owner, plan_delete

    with _connection() as conn:
        migrate(conn)
        owner_id = _owner(conn, args.name)
    pool, store, settings = get_pool(), make_store(), get_settings()
    plan = plan_delete(pool, store, owner_id)
    print(plan.summary())
    if (busy := plan.busy()) and not args.force:
        raise CliError(busy)
    if not args.yes:
        try:
            typed = input(f"This deletes all of it, for good. Type the owner's name ({plan.name}) to confirm: ")
        except EOFError:
            typed = ""
        if typed.strip() != plan.name:
            print("not deleted: the name did not match (or pass --yes)")
            return 1
    stop = None
    if settings.state_machine_arn:  # locally, a cancelled run's next step ends it
        from zerg.runs.stepfunctions import StepFunctionsStarter

        stop = partial(StepFunctionsStarter(settings).stop, cause="owner deleted")
    delete_schedule = None
    if settings.schedule_group:  # locally the rows are the schedules: nothing else fires them
        delete_schedule = make_scheduler(settings, lambda: pool).delete
    try:
        report = delete_owner(pool, store, owner_id, force=args.force, stop_execution=stop,
                              delete_schedule=delete_schedule)
    except DeleteRefused as exc:
        raise CliError(str(exc)) from None
    print("\n".join(report.lines()))
    return 0


def _tls_files(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """--tls-cert and --tls-key: both or neither, readable, and a matching pair (checked before
    the database is touched)."""
    import ssl

    cert, key = args.tls_cert, args.tls_key
    if bool(cert) != bool(key):
        raise CliError("give both --tls-cert and --tls-key (or neither)")
    if cert is None:
        return None, None
    for flag, path in (("--tls-cert", cert), ("--tls-key", key)):
        try:
            with open(path, "rb"):
                pass
        except OSError as exc:
            raise CliError(f"{flag} {path}: {exc.strerror}") from None
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)
    except ssl.SSLError as exc:
        raise CliError(f"cannot use --tls-cert/--tls-key (not a PEM certificate and its key?): {exc.reason or exc}") from None
    return cert, key


def _sign_in_hint(url: str) -> str:
    """How to sign in: at the very first start, the local owner's new ``browser`` device secret
    (shown this once); later, where that secret came from and how to get a new one."""
    from zerg.identity import devices
    from zerg.owners import LOCAL_OWNER, local_owner

    with _connection() as conn:
        device = devices.first_browser_device(conn, local_owner(conn))
    if device is not None:
        return (f"first start: sign in at {url}/ as {LOCAL_OWNER!r} with this device secret "
                f"(shown once, store it now): {device.secret}")
    return (f"sign in at {url}/ with the device secret shown at the first start (lost it? "
            f"zerg owners rotate {LOCAL_OWNER} --device {devices.BROWSER_DEVICE} prints a new one)")


def cmd_serve(args: argparse.Namespace) -> int:
    from zerg.local.housekeeping import Housekeeping, default_tasks
    from zerg.local.server import make_server
    from zerg.migrate import migrate
    from zerg.sandbox import announce
    from zerg.tracing import setup as tracing_setup

    tls_cert, tls_key = _tls_files(args)
    tracing_setup.serving()  # ZERG_TRACE_STORE=auto keeps every run's spans here (docs/tracing.md)
    announce(get_settings())  # a crash's sandboxes go; no isolation here is said once, loudly
    with _connection() as conn:
        migrate(conn)
    try:
        server = make_server(args.host, args.port, tls_cert=tls_cert, tls_key=tls_key)
    except OSError as exc:
        raise CliError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    _reap_orphans(get_runtime())  # then every minute, as a housekeeping task
    print(_sign_in_hint(server.url), flush=True)
    print(f"Zerg API on {server.url}  (web app: {server.url}/, OpenAPI: /api/openapi.json, docs: /api/docs; "
          "Ctrl-C stops)", flush=True)
    housekeeping = Housekeeping(default_tasks(get_runtime()))  # retention sweep and the like
    try:  # a Ctrl-C while the tasks start is a normal stop too, not a traceback and exit 130
        housekeeping.start()
        server.serve()  # returns after Ctrl-C / SIGTERM, once open requests are done
    except KeyboardInterrupt:  # uvicorn re-raises the signal it handled; stopping is the normal exit
        pass
    finally:
        housekeeping.stop()
        get_runtime().close()
    return 0


def cmd_ask(args: argparse.Namespace) -> int:
    import json as _json

    from zerg.local.client import ClientError
    from zerg.local.credentials import ask_as_device

    settings = get_settings()
    task = " ".join(args.task).strip()
    if not task:
        raise CliError("give a task")
    url = args.url or settings.api_url
    try:
        doc = ask_as_device(settings, url, task, from_stdin=args.secret_stdin, as_json=args.json)
    except ClientError as exc:
        raise CliError(str(exc)) from None
    except Exception as exc:  # connection refused and the like: one line, no trace
        raise CliError(f"cannot reach {url}: {exc}") from None
    if args.json:
        print(_json.dumps(doc, indent=2))
    else:
        print("")
        print(doc["result"] if doc["status"] == "success" else f"Run {doc['status']}: {doc.get('error')}")
        print(f"\nrun {doc['run_id']}: {doc['status']}, {len(doc['workers'])} worker(s), tokens {doc['tokens_used']}")
    return 0 if doc["status"] == "success" else 1


def cmd_login(args: argparse.Namespace) -> int:
    from zerg.local import credentials
    from zerg.local.client import ClientError

    settings = get_settings()
    url = args.url or settings.api_url
    try:
        print(credentials.login(settings, url, from_stdin=args.secret_stdin))
    except ClientError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"cannot store the session under {settings.config_dir}: {exc}") from None
    except Exception as exc:
        raise CliError(f"cannot reach {url}: {exc}") from None
    return 0


def cmd_logout(args: argparse.Namespace) -> int:
    from zerg.local import credentials
    from zerg.local.client import ClientError

    settings = get_settings()
    try:
        message, ok = credentials.logout(settings, args.url or settings.api_url)
    except ClientError as exc:
        raise CliError(str(exc)) from None
    print(message, file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


class _SecretOptionRemoved(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):
        parser.error("--secret was removed: a secret on the command line is visible to every process (ps). "
                     "Use zerg login, ZERG_DEVICE_SECRET, --secret-stdin or the prompt")


def _add_client_options(parser: argparse.ArgumentParser) -> None:
    # allow_abbrev=False on these parsers: "--secret X" must never be read as --secret-stdin + a task word.
    parser.add_argument("--secret", nargs="?", action=_SecretOptionRemoved, help=argparse.SUPPRESS)
    parser.add_argument("--url", help="API base URL (default ZERG_API_URL, http://127.0.0.1:8000)")
    parser.add_argument("--secret-stdin", action="store_true",
                        help="read the device secret from standard input (else ZERG_DEVICE_SECRET, "
                             "else a stored session, else a prompt); never give it as an argument")


def cmd_doctor(args: argparse.Namespace) -> int:
    from zerg.cli.doctor import run_doctor

    return run_doctor(get_settings())


def _positive_days(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 36_500:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of days from 1 to 36500")
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="zerg", description="Zerg: the assistant's backend brain.")
    groups = parser.add_subparsers(dest="group", required=True)
    # argparse's own errors (unknown subcommand, missing argument) already print usage + exit 2.

    run = groups.add_parser("run", help="run a task end to end on the local runtime")
    run.add_argument("task", nargs="+", help="what to do, e.g. \"check disk and memory on this machine\"")
    run.add_argument("--verbose", "-v", action="store_true", help="also print the log lines (ZERG_LOG_LEVEL) on stderr")
    _add_owner_option(run)
    run.set_defaults(func=cmd_run)

    serve = groups.add_parser("serve", help="the HTTP API on a local server (HTTPS with --tls-cert/--tls-key)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--tls-cert", metavar="PEM", help="serve HTTPS with this certificate (chain) file")
    serve.add_argument("--tls-key", metavar="PEM", help="the certificate's private key file")
    serve.set_defaults(func=cmd_serve)

    ask_p = groups.add_parser("ask", help="ask through the HTTP API (zerg serve, or --url)", allow_abbrev=False)
    ask_p.add_argument("task", nargs="+")
    _add_client_options(ask_p)
    ask_p.add_argument("--json", action="store_true", help="print the final run document as JSON")
    ask_p.set_defaults(func=cmd_ask)

    login = groups.add_parser("login", help="exchange the device secret for a session token kept in a 0600 file",
                              allow_abbrev=False)
    _add_client_options(login)
    login.set_defaults(func=cmd_login)
    logout = groups.add_parser("logout", help="revoke the stored session on the server and delete its file")
    logout.add_argument("--url", help="API base URL (default ZERG_API_URL, http://127.0.0.1:8000)")
    logout.set_defaults(func=cmd_logout)
    groups.add_parser(
        "doctor", help="check this host: sandbox level, SSH allowlist, database, model provider"
    ).set_defaults(func=cmd_doctor)

    owners = groups.add_parser("owners", help="owners and device secrets").add_subparsers(dest="cmd", required=True)
    add = owners.add_parser("add", help="create an owner and print its device secret once")
    add.add_argument("name")
    add.set_defaults(func=cmd_owners_add)
    rotate = owners.add_parser("rotate", help="new device secret; the old one and its sessions stop working")
    rotate.add_argument("name")
    rotate.add_argument("--device", metavar="DEVICE", help="rotate only this device (default: every live device "
                        "of the owner is revoked and one new 'primary' device replaces them)")
    rotate.set_defaults(func=cmd_owners_rotate)
    pair = owners.add_parser("pair", help="print a one-time pairing code a new device exchanges for its own secret")
    pair.add_argument("name")
    pair.add_argument("--minutes", type=int, default=10, help="how long the code lives (1-60, default 10)")
    pair.set_defaults(func=cmd_owners_pair)
    export = owners.add_parser("export", help="write all of an owner's data (rows and artifacts) to one zip archive")
    export.add_argument("name")
    export.add_argument("--output", "-o", metavar="FILE", help="archive path (default zerg-export-NAME-TIME.zip here)")
    export.set_defaults(func=cmd_owners_export)
    delete = owners.add_parser("delete", help="delete an owner and all of its data, artifacts included")
    delete.add_argument("name")
    delete.add_argument("--yes", action="store_true", help="do not ask for the owner's name to confirm")
    delete.add_argument("--force", action="store_true", help="cancel the owner's unfinished runs first")
    delete.set_defaults(func=cmd_owners_delete)

    db = groups.add_parser("db", help="database schema").add_subparsers(dest="cmd", required=True)
    db.add_parser("migrate", help="apply pending migrations").set_defaults(func=cmd_db_migrate)
    db.add_parser("status", help="show the schema version").set_defaults(func=cmd_db_status)
    stop = db.add_parser("stop", help="stop the embedded PostgreSQL (it keeps running between commands)")
    stop.add_argument("--force", action="store_true", help="stop even while another zerg process uses it")
    stop.set_defaults(func=cmd_db_stop)
    db.add_parser("upgrade", help="move an embedded PostgreSQL 16 data dir (pgserver's) to the embedded "
                  "PostgreSQL 18; the old dir is kept").set_defaults(func=cmd_db_upgrade)

    workers = groups.add_parser("workers", help="worker artifacts").add_subparsers(
        dest="cmd", required=True
    )
    workers.add_parser(
        "reindex", help="rebuild the worker_jobs index from every metadata.json"
    ).set_defaults(func=cmd_workers_reindex)
    gc = workers.add_parser("gc", help="delete workers older than ZERG_ARTIFACT_RETENTION_DAYS that nothing pins")
    gc.add_argument("--dry-run", action="store_true", help="list what would be deleted; delete nothing")
    gc.add_argument("--owner", metavar="NAME", help="only this owner's workers (default: every owner's)")
    gc.add_argument("--days", type=_positive_days, metavar="N", help="retention in days (default ZERG_ARTIFACT_RETENTION_DAYS)")
    gc.set_defaults(func=cmd_workers_gc)

    hosts = groups.add_parser("hosts", help="the owner's SSH hosts for ssh_exec").add_subparsers(dest="cmd", required=True)
    h_add = hosts.add_parser("add", help="register an SSH host; the private key is sealed for the owner")
    h_add.add_argument("alias", help="the name workers use, e.g. cube")
    h_add.add_argument("--hostname", required=True, help="DNS name or IP address")
    h_add.add_argument("--port", type=int, default=22)
    h_add.add_argument("--user", required=True, help="login name on the server")
    h_add.add_argument("--key-file", required=True, metavar="PATH", help="unencrypted private key file (read, sealed, never echoed)")
    pin = h_add.add_mutually_exclusive_group(required=True)
    pin.add_argument("--host-key", metavar="LINE", help="the server's public host key: 'ssh-ed25519 AAAA...'")
    pin.add_argument("--host-key-file", metavar="PATH", help="a file holding that line (e.g. from ssh-keyscan)")
    pin.add_argument("--scan-host-key", action="store_true", help="trust on first use: pin the key the server presents now")
    h_add.add_argument("--replace", action="store_true", help="replace an existing host of that alias")
    _add_owner_option(h_add)
    h_add.set_defaults(func=cmd_hosts_add)
    h_list = hosts.add_parser("list", help="the owner's SSH hosts (fingerprints, never keys)")
    _add_owner_option(h_list)
    h_list.set_defaults(func=cmd_hosts_list)
    h_rm = hosts.add_parser("rm", help="remove an SSH host and its sealed key")
    h_rm.add_argument("alias")
    _add_owner_option(h_rm)
    h_rm.set_defaults(func=cmd_hosts_rm)

    from zerg.cli.memory import add_commands as add_memory_commands

    add_memory_commands(groups, _add_owner_option, _owner)
    from zerg.cli.inbox import add_commands as add_inbox_commands

    add_inbox_commands(groups, _add_owner_option, _owner)
    from zerg.cli.fire import add_fire_commands
    from zerg.cli.schedules import add_commands as add_schedule_commands

    schedules = add_schedule_commands(groups, _add_owner_option, _owner)
    add_fire_commands(schedules, _add_owner_option, _owner)  # run-now, history
    from zerg.cli.contacts import add_commands as add_alert_commands

    add_alert_commands(groups, _add_owner_option, _owner)  # zerg contacts, zerg policy
    from zerg.cli.inbound import add_commands as add_inbound_commands

    add_inbound_commands(groups, _add_owner_option, _owner)  # zerg inbound email|sms|list
    from zerg.cli.agents import add_commands as add_agent_commands

    add_agent_commands(groups, _add_owner_option, _owner)  # zerg agents show|set|reset
    from zerg.cli.approvals import add_commands as add_approval_commands

    add_approval_commands(groups, _add_owner_option, _owner)  # zerg approvals policy show|set|reset
    from zerg.cli.mcp import add_commands as add_mcp_commands
    from zerg.cli.mcp_serve import add_commands as add_mcp_serve_commands

    mcp = add_mcp_commands(groups, _add_owner_option, _owner)  # zerg mcp servers add|list|refresh|rm
    add_mcp_serve_commands(mcp, _add_owner_option, _owner)  # zerg mcp serve
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    import psycopg

    from zerg.db import DatabaseUnavailable
    from zerg.migrate import MigrationError

    try:
        get_settings()
        return func(args)
    except (ConfigError, MigrationError, CliError, DatabaseUnavailable) as exc:
        print(f"zerg: error: {exc}", file=sys.stderr)
        return 2
    except psycopg.OperationalError as exc:  # refused, dropped, or no connection in time (PoolTimeout)
        # The same outage as DatabaseUnavailable (which one depends on timing): the same status.
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        print(f"zerg: error: the database is unreachable ({reason}); check DATABASE_URL, or try again shortly",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
