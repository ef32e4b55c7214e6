"""Cut bench/data/friendsqa/friendsqa.json.gz out of FriendsQA's dev and test files (run once, by hand).

    git -C <a clone of github.com/emorynlp/FriendsQA> show 9ce6c98:dat/friendsqa_dev.json > dev.json
    git -C <the same clone> show 9ce6c98:dat/friendsqa_tst.json > tst.json
    python bench/data/friendsqa/cut.py dev.json tst.json

What it makes (README.md beside this file says why):
- one owner per season (s01..s04), holding that season's episodes of the two files;
- memory files: an episode's scenes in order, consecutive scenes joined into one file until it holds
  at least MIN_CHARS characters (never past MAX_CHARS unless one scene alone is longer), each line
  one utterance ``Speaker: words`` (stage directions as they are), the transcript's tokens joined
  back into plain text (``do n't`` -> ``don't``);
- every question of those scenes (duplicates of a scene's question text once), labelled with the file
  holding its scene, and ``at``: where in that file the first answer's utterance starts.

The bench never runs this: it reads the file this writes (no network at bench time).
"""

from __future__ import annotations

import gzip
import json
import re
import sys
from pathlib import Path

MIN_CHARS = 2_000
MAX_CHARS = 4_000
SOURCE = "github.com/emorynlp/FriendsQA @ 9ce6c98a6acf13c87d96b6811e4409b5de43bdfe, dat/friendsqa_{dev,tst}.json"

_JOINS = [
    (re.compile(r"\b(gon|wan|got) (na|ta)\b", re.IGNORECASE), r"\1\2"),
    (re.compile(r" (n't|'s|'re|'ve|'ll|'d|'m)\b", re.IGNORECASE), r"\1"),
    (re.compile(r" ([.,!?;:)\]}]|\.\.\.)"), r"\1"),
    (re.compile(r"([(\[{]) "), r"\1"),
    (re.compile(r"(\w) - (?=\w)"), r"\1-"),
]


def plain(text: str) -> str:
    """The transcript's tokenised words as a person would type them."""
    text = " ".join(text.split())
    for pattern, repl in _JOINS:
        text = pattern.sub(repl, text)
    return text


def speaker(names: list[str]) -> str | None:
    names = ["Everyone" if n == "#ALL#" else n for n in names if n != "#NOTE#"]
    return " and ".join(names) or None


def scene_lines(paragraph: dict) -> list[tuple[int, str]]:
    """(utterance id, line) of a scene."""
    out = []
    for u in paragraph["utterances:"]:
        who = speaker(u["speakers"])
        words = plain(u["utterance"])
        out.append((u["uid"], f"{who}: {words}" if who else words))
    return out


def cut(paths: list[Path]) -> dict:
    scenes = []  # (season, episode, scene number, paragraph)
    for path in paths:
        for item in json.loads(path.read_text())["data"]:
            season, episode, scene = re.fullmatch(r"s(\d\d)_e(\d\d)_c(\d\d)", item["title"]).groups()
            (paragraph,) = item["paragraphs"]
            scenes.append((int(season), int(episode), int(scene), paragraph))
    scenes.sort(key=lambda s: s[:3])

    owners: dict[str, list[dict]] = {}
    questions = []
    groups: list[list[tuple]] = []
    for s in scenes:
        lines = scene_lines(s[3])
        size = sum(len(line) + 1 for _, line in lines)
        last = groups[-1] if groups else None
        same_episode = last is not None and last[0][0][:2] == s[:2]
        held = sum(len(line) + 1 for g in last or [] for _, line in g[1]) if last else 0
        if same_episode and held < MIN_CHARS and held + size <= MAX_CHARS:
            last.append((s, lines))
        else:
            groups.append([(s, lines)])
    for group in groups:
        season, episode = group[0][0][:2]
        first, final = group[0][0][2], group[-1][0][2]
        owner = f"s{season:02d}"
        scenes_label = f"scene {first}" if first == final else f"scenes {first}-{final}"
        path = f"friends/{owner}/e{episode:02d}-c{first:02d}.md"
        heading = f"# Friends, season {season} episode {episode}, {scenes_label}"
        text = [heading, ""]
        offset = len(heading) + 2
        for s, lines in group:
            starts = {}
            for uid, line in lines:
                starts[uid] = offset
                text.append(line)
                offset += len(line) + 1
            seen = set()
            for qa in s[3]["qas"]:
                words = plain(qa["question"])
                if words.lower() in seen:
                    continue
                seen.add(words.lower())
                at = min(starts[a["utterance_id"]] for a in qa["answers"])
                questions.append({"id": qa["id"], "owner": owner, "question": words, "evidence": [path], "at": at})
        owners.setdefault(owner, []).append({"path": path, "content": "\n".join(text) + "\n"})
    return {"source": SOURCE, "licence": "Apache-2.0 (Emory University)", "owners": owners, "questions": questions}


def main(argv: list[str]) -> None:
    data = cut([Path(p) for p in argv])
    out = Path(__file__).with_name("friendsqa.json.gz")
    raw = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()
    with out.open("wb") as fh, gzip.GzipFile(fileobj=fh, mode="wb", mtime=0, filename="") as gz:
        gz.write(raw)
    files = sum(len(v) for v in data["owners"].values())
    chars = sorted(len(f["content"]) for v in data["owners"].values() for f in v)
    print(f"{out}: {len(data['owners'])} owners, {files} files (chars min {chars[0]}, median "
          f"{chars[len(chars) // 2]}, max {chars[-1]}), {len(data['questions'])} questions, "
          f"{len(raw):,} bytes of JSON, {out.stat().st_size:,} gzip'd")


if __name__ == "__main__":
    main(sys.argv[1:])
