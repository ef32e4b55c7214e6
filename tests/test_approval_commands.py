"""The command classifier behind the ssh_exec allowlists: only one simple command can match, and
nothing hidden behind a shell operator, an interpreter or an odd character ever does."""

from __future__ import annotations

import time

import pytest

from zerg.approvals.commands import COMMAND_MAX, allowed_by, matches_pattern, pattern_problem, words

READ_ONLY = ["df", "df -h", "df -hT /var", "free -m", "uptime", "ps aux", "ss -tlnp", "journalctl -u nginx -n 50",
             "journalctl --unit=nginx --since '1 hour ago' --no-pager", "systemctl status nginx",
             "systemctl status nginx.service --no-pager -n 20", "systemctl status ssh", "journalctl -u ssh -n 20", "systemctl is-active nginx", "docker ps -a",
             "cat /proc/loadavg", "cat /proc/meminfo /proc/uptime", "uname -a"]

ATTACKS = [
    "df -h; rm -rf /tmp/x", "df -h | sh", "df -h && rm x", "df -h || rm x", "df $(rm x)", "df `rm x`",
    "df -h\nrm -rf /tmp/x", "df -h\rrm x", "df -h > /etc/passwd", "df -h >> /etc/passwd", "df -h 2>&1",
    "df < /etc/shadow", "cat <<EOF\nx\nEOF", "df -h &", "df -h & rm x", "(df -h)", "{ df -h; }", "df <(rm x)",
    "sh -c 'df'", "bash -c df", "/bin/sh -c df", "eval df", "exec df", "env sh -c df", "env df", "sudo df -h",
    "sudo bash -c 'df'", "sudo -u root sh -c df", "xargs rm", "df() { rm x; }", "alias df='rm -rf /'",
    "trap 'rm -rf /tmp/x' EXIT", "time rm -rf /tmp/x", "function df", "export PATH=/tmp", "fc -s",
    "systemctl status x; systemctl restart x", "systemctl status x\nsystemctl stop x",
    "docker ps --format '{{.Names}}'", "PATH=/tmp df", "LD_PRELOAD=/tmp/x.so df",
    "df\u00a0-h", "df\t-h", "df -h\u200b", "ｄｆ -h", "df -h\u2028rm x", "df \\\nrm", "df -h # comment",
    "df /tmp/*", "df ~root", "df 'unclosed", "", "   ", "df ''", "python3 -c 'import os'", "ps aux --sort=x",
    "free -h extra", "ss -tlnp state listening",
]
# One simple command, but not read-only inspection: the built-in allowlist does not name it.
NOT_BUILT_IN = ["systemctl restart nginx", "systemctl stop nginx", "journalctl --vacuum-time=1s",
                "journalctl --vacuum-size=1", "journalctl -f", "journalctl --follow", "journalctl --rotate",
                "journalctl -u nginx -f", "docker rm -f x", "docker ps --filter x", "cat /etc/shadow",
                "cat /proc/1/environ", "cat /proc/self/environ", "hostname evil", "df --output=source", "rm -rf /tmp/x",
                "ps aux --sort=x", "uptime -x", "df -hX"]


@pytest.mark.parametrize("command", READ_ONLY)
def test_read_only_inspection_runs_without_asking(command: str) -> None:
    assert allowed_by(command, []) is not None


@pytest.mark.parametrize("command", ATTACKS)
def test_a_write_hidden_behind_an_operator_or_wrapper_never_matches(command: str) -> None:
    assert allowed_by(command, ["df **", "systemctl * *", "journalctl **", "cat **", "hostname *", "trap **",
                                "time **", "alias **"]) is None


@pytest.mark.parametrize("command", NOT_BUILT_IN)
def test_a_command_that_could_write_or_leak_is_not_built_in(command: str) -> None:
    assert words(command) is not None
    assert allowed_by(command, []) is None


def test_an_owner_pattern_matches_word_for_word_and_no_further() -> None:
    patterns = ["systemctl restart nginx", "apt list --upgradable", "tail -n * /var/log/*.log", "ls **"]
    assert allowed_by("systemctl restart nginx", patterns) == "systemctl restart nginx"
    assert allowed_by("systemctl restart nginx postgres", patterns) is None
    assert allowed_by("tail -n 50 /var/log/syslog.log", patterns) == "tail -n * /var/log/*.log"
    assert allowed_by("tail -n 50 /etc/shadow", patterns) is None
    assert allowed_by("ls -la /srv /var", patterns) == "ls **"
    assert allowed_by("ls -la; rm x", patterns) is None
    assert allowed_by("ls $(rm x)", patterns) is None


def test_an_owner_pattern_may_not_name_a_shell_or_an_operator() -> None:
    for bad in ("sh -c *", "bash **", "sudo **", "env **", "docker exec web sh", "timeout 5 **", "df; rm", "df | sh", "df $(x)", "** df", "df ** -h",
                "*", "", "x" * 201):
        assert pattern_problem(bad) is not None, bad
    assert pattern_problem("tail -n * /var/log/*.log") is None


def test_a_pattern_word_cannot_swallow_a_quoted_shell_command() -> None:
    assert words("sudo sh -c 'rm -rf /'") is None
    assert allowed_by("docker exec web sh", ["docker exec * *"]) is None
    assert allowed_by("docker exec web /bin/bash", ["docker exec **"]) is None
    assert allowed_by("systemctl restart ssh", ["systemctl restart ssh"]) == "systemctl restart ssh"
    assert matches_pattern(["ls", "-l"], "ls **")
    assert allowed_by("ls 'a b'", ["ls *"]) == "ls *"  # one quoted word is one word
    assert allowed_by("ls 'a; rm -rf /'", ["ls *"]) is None  # an operator is refused even quoted


def test_a_huge_command_is_refused_at_once() -> None:
    started = time.perf_counter()
    for command in ("df " + "-h " * 500_000, "df -h" + ";" * 1_000_000, "'" * 1_000_000,
                    "df " * (COMMAND_MAX // 3 + 1)):
        assert allowed_by(command, ["df **"]) is None
    assert allowed_by("df " * (COMMAND_MAX // 3), ["df **"]) == "df **"  # the bound, not the words, refused it
    assert time.perf_counter() - started < 2.0  # linear and bounded: a megabyte is refused in milliseconds
