"""Which shell commands may run without asking: the classifier behind the ``ssh_exec`` allowlists
(and reusable for any tool that runs a shell command).

A command matches an allowlist only when it is provably ONE simple command whose words the
allowlist names. Anything the classifier cannot prove simple does not match (the call is then
decided by the owner's policy: ask or deny), never the other way round.

Invariants:
- Proof of simplicity is by refusal, not by parsing shell grammar: the command must be at most
  :data:`COMMAND_MAX` characters of printable ASCII drawn from :data:`_SAFE` (letters, digits,
  space, ``._/:=,@+%-`` and quotes). That excludes every shell operator at once: ``;``, ``&``
  (``&&``, background), ``|`` (``||``, pipes), ``$`` (expansions, ``$(...)``), backquotes, ``<``
  and ``>`` (redirections, here-docs, process substitution), ``(``/``)``/``{``/``}`` (subshells,
  brace groups and brace expansion), ``\\`` (escapes, line continuation), newlines and any other
  whitespace but the space, globs (``*?[]``), ``~``, ``#`` and ``!``, and every non-ASCII
  character (no look-alike, no non-breaking space). What is left splits into words the same way
  in POSIX ``shlex`` and in bash (quotes only group; no character inside them is special).
- Its first word is a program name (no ``VAR=value`` prefix, so no environment injection) that
  is no shell, interpreter or command wrapper (:data:`INTERPRETERS`): ``sh -c``, ``sudo bash -c``,
  ``env sh``, ``xargs``, ``timeout 5 sh``... never match, whatever a pattern says; and an owner's
  pattern never matches a command with a word naming a shell or interpreter anywhere
  (:data:`SHELLS`: ``docker exec web sh``). A built-in rule checks its own operands exactly, so
  ``systemctl status ssh`` is inspection.
- An alias or a function cannot be defined in one simple command without ``(``, ``)``, ``;`` or
  a newline, all refused; a command that *uses* one is matched by its words like any other (the
  allowlisted names are programs whose aliases an owner would have to plant on their own server).
- Time is linear in the input and the input is bounded: a megabyte of text is refused at once.

Two kinds of allowlist entries are matched against the words:
- built-in :class:`Rule` s (:data:`DEFAULT_RULES`): read-only inspection (``df``, ``free``,
  ``uptime``, ``ps``, ``ss``, ``journalctl``, ``systemctl status``, ``docker ps``, a few ``/proc``
  files), each with the exact options and operands it accepts;
- an owner's patterns (:func:`pattern_problem`, :func:`matches_pattern`): words separated by
  spaces, the first a literal program name, each further word a glob (``*``, ``?``, ``[...]``)
  matching exactly one word of the command, and a last word ``**`` matching any number of
  further words.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

COMMAND_MAX = 1_000  # an inspection command is a line, not a script
PATTERN_MAX = 200
_SAFE = re.compile(r"[A-Za-z0-9 ._/:=,@+%'\"-]*")
_PROGRAM = re.compile(r"[A-Za-z0-9._/+-]+")
# Programs that run other text as code or wrap another command: never the program of a match.
INTERPRETERS = frozenset({
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "busybox", "toybox",
    "eval", "exec", "source", ".", "command", "builtin", "env", "xargs", "nohup", "setsid", "timeout",
    "nice", "ionice", "chroot", "nsenter", "unshare", "su", "sudo", "doas", "runuser", "pkexec", "watch", "script",
    "ssh", "parallel", "find", "awk", "gawk", "mawk", "sed", "perl", "python", "python2", "python3", "ruby",
    "node", "php", "lua", "tclsh", "expect", "socat", "nc", "ncat", "tee", "dd",
    # shell builtins and keywords that run a string later or change how the next words run
    "trap", "fc", "time", "coproc", "alias", "function", "export", "set", "declare", "typeset", "readonly",
    "local", "enable", "hash",
})
# ... and the ones that, anywhere in a command, mean "run this as code" (``docker exec web sh``,
# ``kubectl exec -- bash``): no word of a command matched by a pattern may name one.
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "busybox", "toybox",
                    "eval", "exec", "source", "perl", "python", "python2", "python3", "ruby", "node", "php", "lua",
                    "tclsh", "expect"})
_PYTHONISH = re.compile(r"(python|perl|ruby|php|lua|node)[0-9.]*")


def words(command: str) -> list[str] | None:
    """The words of ``command`` when it is provably one simple command (see the module's
    invariants), else None."""
    if not command or len(command) > COMMAND_MAX or not _SAFE.fullmatch(command):
        return None
    try:
        split = shlex.split(command, posix=True)
    except ValueError:  # an unclosed quote
        return None
    if not split or any(w == "" for w in split) or not _PROGRAM.fullmatch(split[0]):
        return None
    if _named(split[0], INTERPRETERS):
        return None
    return split


def _named(word: str, names: frozenset[str]) -> bool:
    name = word.rsplit("/", 1)[-1]
    return name in names or bool(_PYTHONISH.fullmatch(name))


@dataclass(frozen=True)
class Rule:
    """One read-only program (and its fixed leading words, e.g. ``systemctl status``) with the
    options and operands it may take. Options may come in any order; combined short options
    (``-hT``) are accepted when each letter is allowed alone; a valued option takes its value as
    the next word or after ``=`` (``--lines=50``)."""

    lead: tuple[str, ...]
    flags: frozenset[str] = frozenset()
    valued: Mapping[str, str] = field(default_factory=dict)  # option -> the regex its value must match
    operand: str | None = None  # the regex each operand must match; None: no operands
    max_operands: int = 0

    def accepts(self, split: list[str]) -> bool:
        if tuple(split[: len(self.lead)]) != self.lead:
            return False
        rest, operands, i = split[len(self.lead):], 0, 0
        while i < len(rest):
            word = rest[i]
            i += 1
            if word in self.flags:
                continue
            name, eq, value = word.partition("=")
            if name in self.valued:
                if not eq:
                    if i >= len(rest):
                        return False
                    value, i = rest[i], i + 1
                if not re.fullmatch(self.valued[name], value):
                    return False
                continue
            if re.fullmatch(r"-[A-Za-z]{2,}", word) and all(f"-{c}" in self.flags for c in word[1:]):
                continue
            if self.operand is None or word.startswith("-") or not re.fullmatch(self.operand, word):
                return False
            operands += 1
            if operands > self.max_operands:
                return False
        return True


_PATH = r"/[A-Za-z0-9._/-]*"
_UNIT = r"[A-Za-z0-9@._:-]{1,200}"
_COUNT = r"[0-9]{1,6}"
_TIME = r"[A-Za-z0-9 :._+-]{1,40}"
_PROC = r"/proc/(loadavg|meminfo|cpuinfo|uptime|version|mounts|stat|vmstat|diskstats|pressure/(cpu|memory|io))"

# The read-only inspection commands that run on any host without asking (unless the owner turns
# them off). Deliberately left out: ``journalctl -f``/``--follow`` (never ends by itself: it holds
# the worker until the timeout; ``-n`` reads the same lines), every ``journalctl`` option that
# writes (``--vacuum-*``, ``--rotate``, ``--flush``...), ``systemctl`` verbs other than the
# status ones, ``docker ps --format`` (a Go template: braces), ``cat`` of anything but a few
# /proc and /etc files (``/proc/<pid>/environ`` and ``cmdline`` hold secrets), and ``sudo``.
DEFAULT_RULES: tuple[Rule, ...] = (
    Rule(("df",), frozenset({"-h", "-H", "-T", "-i", "-k", "-l", "-P", "--human-readable", "--print-type",
                             "--inodes", "--local", "--total"}), operand=_PATH, max_operands=8),
    Rule(("free",), frozenset({"-h", "-m", "-g", "-k", "-b", "-t", "-w", "--human", "--total", "--wide"})),
    Rule(("uptime",), frozenset({"-p", "-s", "--pretty", "--since"})),
    Rule(("ps",), frozenset({"aux", "auxf", "auxww", "-e", "-f", "-F", "-l", "-y", "-A", "--forest"})),
    Rule(("ss",), frozenset({"-t", "-u", "-l", "-n", "-p", "-s", "-a", "-x", "-4", "-6", "-w", "-e", "-m", "-i"})),
    Rule(("journalctl",), frozenset({"--no-pager", "-r", "--reverse", "-b", "-k", "--dmesg", "--utc", "-x", "-q",
                                     "--quiet", "--no-hostname"}),
         valued={"-u": _UNIT, "--unit": _UNIT, "-n": _COUNT, "--lines": _COUNT, "--since": _TIME, "-S": _TIME,
                 "--until": _TIME, "-U": _TIME, "-p": r"[a-z0-9.]{1,20}", "--priority": r"[a-z0-9.]{1,20}",
                 "-o": r"short|short-iso|short-precise|short-monotonic|cat|json|verbose",
                 "--output": r"short|short-iso|short-precise|short-monotonic|cat|json|verbose"}),
    *(Rule(("systemctl", verb), frozenset({"--no-pager", "-l", "--full", "--all", "-a"}),
           valued={"-n": _COUNT, "--lines": _COUNT}, operand=_UNIT, max_operands=10)
      for verb in ("status", "is-active", "is-failed", "is-enabled")),
    Rule(("systemctl", "list-units"), frozenset({"--failed", "--no-pager", "--all", "-a", "--plain", "--no-legend"}),
         valued={"--type": r"[a-z,]{1,40}", "-t": r"[a-z,]{1,40}", "--state": r"[a-z,-]{1,60}"}),
    Rule(("docker", "ps"), frozenset({"-a", "--all", "--no-trunc", "-q", "--quiet", "-s", "--size"})),
    Rule(("cat",), operand=rf"{_PROC}|/etc/os-release|/etc/hostname", max_operands=4),
    Rule(("uname",), frozenset({"-a", "-r", "-m", "-s", "-n", "-v", "-o", "--all"})),
    Rule(("nproc",)),
    Rule(("hostname",)),  # no operand: ``hostname NAME`` sets it
)


def pattern_problem(pattern: str) -> str | None:
    """Why an owner's pattern cannot be used (None: it can). A pattern is judged as a command is,
    except that its argument words may hold the glob characters ``*?[]``."""
    if not pattern or len(pattern) > PATTERN_MAX:
        return f"must be 1 to {PATTERN_MAX} characters"
    if not re.fullmatch(r"[A-Za-z0-9 ._/:=,@+%*?\[\]-]*", pattern):
        return "may hold only letters, digits, spaces and ._/:=,@+%- (and *?[] in arguments); no shell operators"
    parts = pattern.split()
    if not _PROGRAM.fullmatch(parts[0]):
        return f"must start with a program name, not {parts[0]!r}"
    if _named(parts[0], INTERPRETERS):
        return f"{parts[0]!r} runs other commands or code: it never runs without asking"
    bad = next((p for p in parts[1:] if _named(p, SHELLS)), None)
    if bad is not None:
        return f"{bad!r} runs other commands or code: it never runs without asking"
    if "**" in parts[:-1]:
        return "'**' may only be the last word"
    return None


def matches_pattern(split: list[str], pattern: str) -> bool:
    """Whether a simple command's words match an owner's pattern (:func:`pattern_problem` holds);
    never when a word names a shell or an interpreter (a glob or ``**`` could take one)."""
    parts = pattern.split()
    if parts[0] != split[0] or any(_named(w, SHELLS) for w in split[1:]):
        return False
    if parts[-1] == "**":
        parts = parts[:-1]
        if len(split) < len(parts):
            return False
        split = split[: len(parts)]
    return len(split) == len(parts) and all(fnmatchcase(w, p) for w, p in zip(split[1:], parts[1:], strict=True))


def allowed_by(command: str, patterns: Iterable[str], rules: Iterable[Rule] = DEFAULT_RULES) -> str | None:
    """What lets ``command`` run without asking: the matching pattern, or the built-in rule's
    program; None when nothing does (or the command is not one simple command)."""
    split = words(command)
    if split is None:
        return None
    for pattern in patterns:
        if matches_pattern(split, pattern):
            return pattern
    for rule in rules:
        if rule.accepts(split):
            return f"built-in: {' '.join(rule.lead)}"
    return None
