"""The person's words of an email reply (``zerg.inbound.reply_text.strip_quotes``): how many of the
case set come out exactly, and how long a parse takes.

- Exact match (after white space is normalised) on tests/support/reply_cases.py: every failure kind
  of issue 26 (A1-A4 lose the owner's words, B1-B7 leak history), the signature conventions and owner
  words that only look like history, in a dozen languages; per kind, then in all.
- Parse time of each case (p50/p95 over all of them, each parsed ``repeat`` times), and of a long
  reply: a short answer above a thread quoted 12 levels deep (about 460 lines, 33 KB), as a
  long-running conversation's latest reply is.

Smoke (main(smoke=True)): every case once for the exact match, 3 timings of each.

Run: .venv/bin/python -m bench.reply_text
"""

from __future__ import annotations

import statistics
import time

from bench._common import script


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]


def _line(label: str, samples: list[float]) -> str:
    p50, p95 = _percentiles(samples)
    return f"{label:<44} p50 {p50:8.3f} ms   p95 {p95:8.3f} ms   (n={len(samples)})"


def long_reply() -> str:
    """A short answer above a thread quoted 12 levels deep: each level an attribution, a paragraph,
    an Outlook header block, a footer; the older levels behind more ``>``."""
    answer = "Yes, make the disk check weekly and keep the backup check daily.\n\nThanks,\nDana"
    paragraph = ("The check ran on every host of the fleet and found three of them running out of space on\n"
                 "the data volume; the others have at least half of their space left. Logs under /var/log\n"
                 "are the largest, and they grew 4% since yesterday.\n")
    levels = []
    for depth in range(12):
        body = (f"On Mon, Nov {23 - depth}, 2026 at 6:01 AM Person {depth} <person{depth}@example.com> wrote:\n"
                + paragraph * 6
                + f"From: Zerg <zerg@zerg.localhost>\nSent: Monday, November {23 - depth}, 2026 6:01 AM\n"
                  "To: Dana\nSubject: [Zerg WARNING] Disk 91% full on web-1\n\n"
                + paragraph * 4 + "Sent from my iPhone\n")
        levels.append("\n".join(">" * (depth + 1) + " " + line if line else ">" * (depth + 1)
                                for line in body.split("\n")))
    return answer + "\n\n" + "\n".join(levels) + "\n"


def main(smoke: bool = False) -> None:
    from tests.support.reply_cases import CASES, KINDS
    from zerg.inbound.reply_text import strip_quotes

    repeat = 3 if smoke else 50

    def words(text: str) -> str:
        return " ".join(text.split())

    print("== exact match on the case set (tests/support/reply_cases.py) ==")
    total = 0
    for kind, what in KINDS.items():
        cases = [c for c in CASES if c.kind == kind]
        hits = sum(words(strip_quotes(c.text, quoted_subject=c.subject, marks=c.marks)) == words(c.expected)
                   for c in cases)
        total += hits
        print(f"{kind:<8} {what:<58} {hits}/{len(cases)}")
    print(f"{'exact match, all cases':<44} {total}/{len(CASES)} = {100 * total / len(CASES):.1f}%")

    print("== parse time (strip_quotes) ==")
    samples = []
    for case in CASES:
        for _ in range(repeat):
            started = time.perf_counter()
            strip_quotes(case.text, quoted_subject=case.subject, marks=case.marks)
            samples.append((time.perf_counter() - started) * 1000)
    print(_line(f"each case ({len(CASES)} cases)", samples))
    text = long_reply()
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        got = strip_quotes(text, quoted_subject="[Zerg WARNING] Disk 91% full on web-1",
                           marks=("@zerg.localhost", "zerg@zerg.localhost"))
        samples.append((time.perf_counter() - started) * 1000)
    assert got == "Yes, make the disk check weekly and keep the backup check daily.", got
    print(_line(f"a long reply ({text.count(chr(10))} lines, {len(text) / 1024:.0f} KB)", samples))


if __name__ == "__main__":
    script(main)
