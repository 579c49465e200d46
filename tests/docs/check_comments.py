#!/usr/bin/env python3
"""Fails when a comment in the library's headers holds history rather than what and why: an ISO
date, or a measured figure (a rate such as GFLOP/s, GB/s or tokens/s, a timing in s/ms/us/ns, a
speed-up such as "1.3x faster" or "12 % slower").

    check_comments.py ROOT [DIR ...] [--cmake]   DIR defaults to include; --cmake also checks the #
                                                  comments of the CMake files (the top level, cmake/,
                                                  tests/, examples/, tools/,
                                                  benchmarks/)

Measurements belong in docs/performance/ (dated, with their command); a comment keeps the reason
("the bf16 product reads half the bytes"), not the figure. Prints file:line: the comment and the
rule it breaks, and exits 1 when anything is found.
"""
import pathlib
import re
import sys

NUM = r"(?<![\w.])\d+(?:[.,]\d+)*"
RULES = [
    ("an ISO date", re.compile(r"(?<![\"'])\b20\d\d-[01]\d-[0-3]\d\b")),
    ("a measured rate", re.compile(NUM + r"\s*(?:[kMG]?FLOP/s|[kMGT]i?B/s|tokens?/s|tok/s|elements/s|"
                                   r"[kMG]? ?elements/s|rows/s|steps/s|it/s)", re.I)),
    ("a measured time", re.compile(NUM + r"\s*(?:ms|µs|us|ns)\b")),
    ("a measured time", re.compile(NUM + r"\s*s\b(?!\w)(?=[\s,;:)\]]|$)")),
    ("a measured speed-up", re.compile(NUM + r"\s*(?:×|x)\s*(?:faster|slower|the speed|as fast)", re.I)),
    ("a measured speed-up", re.compile(NUM + r"\s*%\s*(?:faster|slower|of (?:the )?(?:peak|bandwidth|wall))", re.I)),
    ("a measured speed-up", re.compile(r"\b(?:faster|slower) by\s+" + NUM, re.I)),
    ("a measured speed-up", re.compile(NUM + r"\s*(?:×|x)\s+(?:the (?:speed|others|bandwidth|rate|time|throughput)|as fast|than)", re.I)),
    ("a measured fraction", re.compile(NUM + r"\s*(?:of (?:the |its )?(?:memory )?(?:probe|peak|bandwidth))", re.I)),
    ("a measured fraction", re.compile(r"\bwithin\s+" + NUM + r"\s*%", re.I)),
    ("a measurement on a named CPU", re.compile(r"\b(?:on|of) (?:a|one|the) (?:\d-core )?Zen ?\d", re.I)),
    ("a measurement", re.compile(r"\bmeasured\b[^.]*?" + NUM, re.I)),
]


def cpp_comments(text):
    """Yields (line number, comment text) of every // and /* */ comment outside string literals."""
    i, n, line = 0, len(text), 1
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            yield line, text[i + 2:j]
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j
            for k, part in enumerate(text[i + 2:j].split("\n")):
                yield line + k, part
            line += text.count("\n", i, j)
            i = j + 2
        elif c == 'R' and text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            if not m:
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i)
            end = n if end < 0 else end
            line += text.count("\n", i, end)
            i = end + len(m.group(1)) + 2
        elif c == '"' or (c == "'" and not (i > 0 and (text[i - 1].isalnum()))):
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
        else:
            i += 1


def hash_comments(text):
    for number, raw in enumerate(text.split("\n"), 1):
        at = raw.find("#")
        if at >= 0 and raw[:at].count('"') % 2 == 0:
            yield number, raw[at + 1:]


def check(path, comments):
    found = []
    for number, comment in comments:
        for what, rule in RULES:
            if rule.search(comment):
                found.append(f"{path}:{number}: {what} in a comment:{comment.rstrip()}")
                break
    return found


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    if not args:
        print(__doc__)
        return 2
    root = pathlib.Path(args[0])
    dirs = args[1:] or ["include"]
    found = []
    for d in dirs:
        for path in sorted((root / d).rglob("*.hpp")):
            found += check(path.relative_to(root), cpp_comments(path.read_text(encoding="utf-8")))
    if "--cmake" in argv:
        cmake_files = [*root.glob("CMakeLists.txt"), *root.glob("cmake/*.cmake"),
                       *root.glob("tests/**/CMakeLists.txt"), *root.glob("examples/**/CMakeLists.txt"),
                       *root.glob("tools/**/CMakeLists.txt"),
                       *root.glob("benchmarks/**/CMakeLists.txt")]
        for path in sorted(cmake_files):
            if path.exists():
                found += check(path.relative_to(root), hash_comments(path.read_text(encoding="utf-8")))
    for f in found:
        print(f)
    if found:
        print(f"\n{len(found)} comment line(s) hold history or a measurement: keep the reason in the comment "
              "and move the figure, with its date and command, to docs/performance/.")
        return 1
    print("no ISO date or measured figure in the comments")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
