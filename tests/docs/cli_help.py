#!/usr/bin/env python3
"""docs/guide/cli.md's per-subcommand help blocks, generated from the program itself.

    cli_help.py --update CAUSALQWEN docs/guide/cli.md   rewrite every help block from `CAUSALQWEN <sub> --help`
    cli_help.py --check  CAUSALQWEN docs/guide/cli.md   exit 1 when the page differs from the program (a test)

The page holds, for each subcommand, a block between two marker lines:

    <!-- cli-help: train -->
    ```text
    (the output of `causalqwen train --help`)
    ```
    <!-- /cli-help -->

Only the lines between the markers are generated; the prose around them is the page's own.
--update fills every block and appends a section for a subcommand the page does not have yet;
--check also fails on a block for a subcommand the program no longer has.
"""
import os
import re
import subprocess
import sys

BEGIN = re.compile(r"^<!-- cli-help: ([a-z0-9-]+) -->$")
END = "<!-- /cli-help -->"


def run(program, *args):
    env = dict(os.environ, COLUMNS="100", OMP_WAIT_POLICY="PASSIVE", GOMP_SPINCOUNT="10000")
    out = subprocess.run([program, *args], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.exit(f"cli_help.py: `{' '.join([program, *args])}` exited with {out.returncode}: {out.stderr.strip()}")
    return out.stdout


def subcommands(program):
    names, inside = [], False
    for line in run(program, "--help").split("\n"):
        if re.match(r"^\s*subcommands:\s*$", line, re.I):
            inside = True
        elif inside:
            m = re.match(r"^\s+([a-z0-9][a-z0-9-]*)\s", line + " ")
            if m:
                names.append(m.group(1))
            elif line.strip() and not line.startswith(" "):
                inside = False
    if not names:
        sys.exit(f"cli_help.py: found no subcommand in `{program} --help`")
    return names


def help_block(program, name):
    text = run(program, name, "--help").rstrip("\n")
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    return f"```text\n$ causalqwen {name} --help\n{text}\n```"


def render(page, program):
    names = subcommands(program)
    lines = page.split("\n")
    out, seen, stale, i = [], [], [], 0
    while i < len(lines):
        m = BEGIN.match(lines[i])
        if not m:
            out.append(lines[i])
            i += 1
            continue
        name = m.group(1)
        j = i + 1
        while j < len(lines) and lines[j] != END:
            j += 1
        if j == len(lines):
            sys.exit(f"cli_help.py: the block of '{name}' has no closing {END}")
        seen.append(name)
        if name not in names:
            stale.append(name)
            out += lines[i:j + 1]
        else:
            out += [lines[i], help_block(program, name), END]
        i = j + 1
    text = "\n".join(out)
    for name in names:
        if name not in seen:
            text = text.rstrip("\n") + (f"\n\n## {name}\n\n<!-- cli-help: {name} -->\n{help_block(program, name)}\n"
                                        f"{END}\n")
    return text, stale


def main(argv):
    if len(argv) != 4 or argv[1] not in ("--update", "--check"):
        print(__doc__)
        return 2
    mode, program, path = argv[1:]
    with open(path, encoding="utf-8") as f:
        page = f.read()
    text, stale = render(page, program)
    page_path = os.path.abspath(path)
    root = os.path.dirname(page_path)
    while root != os.path.dirname(root) and not os.path.isdir(os.path.join(root, "include", "causalqwen")):
        root = os.path.dirname(root)
    shown = os.path.relpath(page_path, root) if os.path.isdir(os.path.join(root, "include", "causalqwen")) else page_path
    command = f"python3 tests/docs/cli_help.py --update build/bin/causalqwen {shown}"
    if mode == "--update":
        if text != page:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            print(f"updated {path}")
        for name in stale:
            print(f"{path}: the program has no subcommand '{name}' any more: remove its section by hand")
        return 1 if stale else 0
    if stale:
        print(f"{path}: help block(s) for subcommand(s) the program does not have: {', '.join(stale)}")
    if text != page:
        import difflib
        sys.stdout.writelines(difflib.unified_diff(page.splitlines(True), text.splitlines(True), path, "program"))
        print(f"\n{path} does not match the program's --help. From the repository's root, run:\n    {command}")
        return 1
    if stale:
        return 1
    print(f"{path} matches every subcommand's --help")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
