#!/usr/bin/env python3
"""README.md stays the front door: at most 300 lines, at most 3 ISO dates, no commit hashes, and
its Quick start's first code block holds exactly two commands, the second of which .ci/run runs
verbatim.

    check_readme.py ROOT
"""
import pathlib
import re
import sys


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    root = pathlib.Path(argv[1])
    text = (root / "README.md").read_text(encoding="utf-8")
    lines = text.split("\n")
    count = len(lines) - (1 if text.endswith("\n") else 0)
    problems = []
    if count > 300:
        problems.append(f"README.md has {count} lines, more than 300: move the rest into docs/")
    dates = re.findall(r"\b20\d\d-[01]\d-[0-3]\d\b", text)
    if len(dates) > 3:
        problems.append(f"README.md holds {len(dates)} ISO dates, more than 3: dated figures belong in docs/performance/")
    hashes = [h for h in re.findall(r"\b[0-9a-f]{7,40}\b", text) if re.search(r"[a-f]", h) and re.search(r"\d", h)]
    if hashes:
        problems.append(f"README.md names commit hashes ({', '.join(hashes[:3])}): history belongs in commit messages")
    start = next((i for i, l in enumerate(lines) if re.match(r"^#+ .*[Qq]uick ?start", l)), None)
    if start is None:
        problems.append("README.md has no 'Quick start' heading")
    else:
        fence = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("```")), None)
        end = next((i for i in range((fence or 0) + 1, len(lines)) if lines[i].startswith("```")), None)
        commands = [l for l in lines[fence + 1:end] if l.strip()] if fence is not None and end else []
        if len(commands) != 2:
            problems.append(f"the Quick start's first code block holds {len(commands)} commands, expected 2 (demo, then tests)")
        elif commands[1] not in (root / ".ci" / "run").read_text(encoding="utf-8"):
            problems.append("the Quick start's second command is not run verbatim by .ci/run")
    for p in problems:
        print(p)
    if not problems:
        print(f"README.md: {count} lines, {len(dates)} dates, no commit hash, the Quick start's two commands")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
