"""``zerg memory``: the owner's memory files from the command line, through the same service as the
memory tools and the API (:mod:`zerg.memory.filesystem`), and the organisational memories
(``facts``, ``forget``, ``unforget``: :mod:`zerg.memory.facts`).

Every command acts for the local owner, or ``--owner NAME``. Exit status: 0 done, 1 not found,
2 bad input (one line on stderr, never a traceback). ``cat`` prints the content exactly as stored,
so ``zerg memory cat P > f`` and ``zerg memory write P --file f`` round-trip.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from zerg.cli.common import fail as _fail
from zerg.cli.common import run_as_owner
from zerg.memory.paths import MAX_CONTENT_BYTES, MemoryInputError


def _run(args: argparse.Namespace, work: Callable[[Any, int], int]) -> int:
    """``work(runtime, owner_id)`` with the service's refusals as exit statuses."""
    from zerg.memory import filesystem as fs

    return run_as_owner(args, work, ((fs.MemoryNotFound, 1), (fs.MemoryInputError, 2)))


def _content(args: argparse.Namespace) -> str:
    """The new content: ``--file``, else stdin; at most 256 KiB of UTF-8."""
    source = args.file or "stdin"
    try:
        if args.file:
            with open(args.file, "rb") as fh:
                data = fh.read(MAX_CONTENT_BYTES + 1)
        else:
            data = sys.stdin.buffer.read(MAX_CONTENT_BYTES + 1)
    except OSError as exc:
        raise MemoryInputError(f"--file {args.file}: {exc.strerror}") from None
    if len(data) > MAX_CONTENT_BYTES:
        raise MemoryInputError(f"{source} holds more than {MAX_CONTENT_BYTES} bytes; a memory file holds at most 256 KiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MemoryInputError(f"{source} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})") from None


def cmd_ls(args: argparse.Namespace) -> int:
    from zerg.memory import filesystem as fs

    def work(rt: Any, owner_id: int) -> int:
        listing = fs.ls(rt, owner_id, args.prefix or "", args.limit)
        if not listing.files:
            print(f"no memory files{' under ' + repr(args.prefix) if args.prefix else ''}")
        for f in listing.files:
            print(f"{f.path}\t{f.size}\t{f.writer}\t{f.updated_at:%Y-%m-%d %H:%M}\t{','.join(f.tags)}\t{f.title}")
        if listing.total > len(listing.files):
            print(f"({len(listing.files)} of {listing.total}: --limit N shows more)", file=sys.stderr)
        return 0
    return _run(args, work)


def cmd_cat(args: argparse.Namespace) -> int:
    from zerg.memory import filesystem as fs

    def work(rt: Any, owner_id: int) -> int:
        sys.stdout.write(fs.read(rt, owner_id, args.path).content or "")
        sys.stdout.flush()
        return 0
    return _run(args, work)


def cmd_write(args: argparse.Namespace) -> int:
    from zerg.memory import filesystem as fs

    try:
        content = _content(args)
    except MemoryInputError as exc:
        return _fail(str(exc), 2)

    def work(rt: Any, owner_id: int) -> int:
        out = fs.write(rt, owner_id, args.path, content, title=args.title, tags=args.tag, writer="user")
        if not out.changed:
            print(f"unchanged {out.file.path}")
        elif out.created:
            print(f"created {out.file.path} ({out.file.size} bytes)")
        else:
            print(f"replaced {out.file.path} ({out.file.size} bytes; the previous version is kept 30 days)")
        return 0
    return _run(args, work)


def cmd_rm(args: argparse.Namespace) -> int:
    from zerg.memory import filesystem as fs

    def work(rt: Any, owner_id: int) -> int:
        gone = fs.delete(rt, owner_id, args.path)
        print(f"deleted {gone.path} (restorable for 30 days: zerg memory versions {gone.path!r})")
        return 0
    return _run(args, work)


def cmd_search(args: argparse.Namespace) -> int:
    from zerg.memory import filesystem as fs

    def work(rt: Any, owner_id: int) -> int:
        out = fs.search(rt, owner_id, args.query, tags=args.tag or (), limit=args.limit)
        if out.note:
            print(f"({out.note})", file=sys.stderr)
        if not out.hits:
            print("no match")
        for h in out.hits:
            print(f"{h.path}\t{h.method}\t{h.score:.4f}\t{h.title}\n    {h.snippet}")
        return 0
    return _run(args, work)


def cmd_versions(args: argparse.Namespace) -> int:
    from zerg.memory import filesystem as fs

    def work(rt: Any, owner_id: int) -> int:
        kept = fs.versions_of(rt, owner_id, args.path)
        if not kept:
            print(f"no kept versions of {args.path!r}")
        for v in kept:
            print(f"{v.id}\t{v.reason}\t{v.replaced_at:%Y-%m-%d %H:%M}\twritten by {v.writer}"
                  f"{' in run ' + str(v.writer_run_id) if v.writer_run_id else ''}\t{v.size} bytes\t{v.title}")
        return 0
    return _run(args, work)


def cmd_restore(args: argparse.Namespace) -> int:
    from zerg.memory import filesystem as fs

    def work(rt: Any, owner_id: int) -> int:
        out = fs.restore(rt, owner_id, args.path, args.version_id, writer="user")
        print(f"restored {out.file.path} from version {args.version_id}" if out.changed
              else f"unchanged {out.file.path} (already that version)")
        return 0
    return _run(args, work)


def cmd_facts(args: argparse.Namespace) -> int:
    def work(rt: Any, owner_id: int) -> int:
        from zerg.memory import facts
        from zerg.tools.fact_tools import line

        listing = facts.list_forgotten if args.forgotten else facts.list_facts
        with rt.pool.connection() as conn:
            rows = listing(conn, owner_id, category=args.category, limit=args.limit)
        if not rows:
            print(("no forgotten organisational memories (restorable for 30 days)" if args.forgotten
                   else "no organisational memories") + (f" in category {args.category}" if args.category else
                                                         "" if args.forgotten else " yet"))
        for row in rows:
            print(line(row))
        return 0
    return _run(args, work)


def cmd_forget(args: argparse.Namespace) -> int:
    def work(rt: Any, owner_id: int) -> int:
        from zerg.memory import facts

        with rt.pool.connection() as conn:
            row = facts.forget_fact(conn, owner_id, args.id)
        if row is None:
            return _fail(f"memory #{args.id} not found", 1)
        print(f"forgot memory #{row['id']} [{row['category']}]: {row['content']} (zerg memory unforget {row['id']} "
              "brings it back within 30 days)")
        return 0
    return _run(args, work)


def cmd_unforget(args: argparse.Namespace) -> int:
    def work(rt: Any, owner_id: int) -> int:
        from zerg.memory import facts

        with rt.pool.connection() as conn:
            row = facts.restore_fact(conn, owner_id, args.id)
        if row is None:
            return _fail(f"no memory #{args.id} forgotten within the last {facts.FORGET_KEEP_DAYS} days", 1)
        print(f"restored memory #{row['id']} [{row['category']}]: {row['content']}")
        return 0
    return _run(args, work)


def _fact_id(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) < 2**62:
        raise argparse.ArgumentTypeError(f"{text!r} is not a memory id (a positive number, as zerg memory facts shows it)")
    return int(text)


def _fact_limit(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 200:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number from 1 to 200")
    return int(text)


def add_commands(groups: Any, add_owner_option: Callable[[argparse.ArgumentParser], None],
                 resolve_owner: Callable[[Any, str | None], int]) -> None:
    """The ``zerg memory`` group (files and organisational memories) under the top-level
    sub-parsers. ``resolve_owner(conn, name)`` is the CLI's own (``--owner`` or the
    local owner; its failure is the CLI's error)."""
    memory = groups.add_parser("memory", help="the owner's long-term memory: files (notes, episodes) and organisational memories").add_subparsers(
        dest="cmd", required=True)
    ls = memory.add_parser("ls", help="list memory files by path")
    ls.add_argument("prefix", nargs="?", default="", help="only paths starting with this, e.g. notes/")
    ls.add_argument("--limit", type=int, default=100, metavar="N", help="at most N files (1-1000, default 100)")
    cat = memory.add_parser("cat", help="print a memory file's content")
    cat.add_argument("path")
    write = memory.add_parser("write", help="create or replace a memory file from --file or stdin")
    write.add_argument("path")
    write.add_argument("--file", metavar="FILE", help="read the content from FILE (default: stdin)")
    write.add_argument("--title", help="the file's title (default: kept, or the first '# heading')")
    write.add_argument("--tag", action="append", metavar="TAG", help="a tag (repeat for several; default: kept)")
    rm = memory.add_parser("rm", help="delete a memory file (restorable for 30 days)")
    rm.add_argument("path")
    search = memory.add_parser("search", help="search memory files by words (and meaning, with embeddings)")
    search.add_argument("query")
    search.add_argument("--tag", action="append", metavar="TAG", help="only files carrying every --tag given")
    search.add_argument("--limit", type=int, default=5, metavar="N", help="at most N hits (1-50, default 5)")
    versions = memory.add_parser("versions", help="the kept previous versions of a memory file")
    versions.add_argument("path")
    restore = memory.add_parser("restore", help="write a kept version back")
    restore.add_argument("path")
    restore.add_argument("version_id", type=int, help="an id from zerg memory versions")
    from zerg.memory.facts import CATEGORIES

    facts_p = memory.add_parser("facts", help="what Zerg remembers about the owner (organisational memory)")
    facts_p.add_argument("--category", choices=CATEGORIES, help="only this category")
    facts_p.add_argument("--limit", type=_fact_limit, default=50, metavar="N", help="how many (1-200, default 50)")
    facts_p.add_argument("--forgotten", action="store_true",
                         help="the memories forgotten in the last 30 days (restorable with unforget), newest first")
    forget = memory.add_parser("forget", help="forget one organisational memory by id (restorable for 30 days)")
    forget.add_argument("id", type=_fact_id, help="the memory's id (zerg memory facts shows it)")
    unforget = memory.add_parser("unforget", help="bring back a memory forgotten in the last 30 days")
    unforget.add_argument("id", type=_fact_id, help="the memory's id (zerg memory facts --forgotten shows it)")
    for parser, func in ((ls, cmd_ls), (cat, cmd_cat), (write, cmd_write), (rm, cmd_rm), (search, cmd_search),
                         (versions, cmd_versions), (restore, cmd_restore), (facts_p, cmd_facts),
                         (forget, cmd_forget), (unforget, cmd_unforget)):
        add_owner_option(parser)
        parser.set_defaults(func=func, resolve_owner=resolve_owner)
