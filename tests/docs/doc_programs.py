#!/usr/bin/env python3
"""The C++ programs of README.md and docs/**/*.md, gathered into one translation unit.

    doc_programs.py ROOT OUT.cpp OUT.list    write the unit and the list of programs (CMake runs
                                             this at configure time)
    doc_programs.py ROOT --check             only check the fences (a test)

Every block fenced ```cpp is a whole program: it has a main() and compiles as it stands against
causalqwen::causalqwen. The unit hoists every block's #include lines to the top, puts the rest of
block N of a page into `namespace docs_<page>_<N>`, and ends with a main() that runs one of them by
name: `docs_programs README_1 CHECKPOINT_DIR` (every program gets the test fixture's checkpoint
directory as argv[1]; programs that need none ignore it). A block that is deliberately not a
whole program is fenced ```cpp fragment: it is listed, never compiled. Any other info string on a
C++ fence (```c++, ```cpp whole, ...) is an error, so that no block is silently skipped, and so
is a fence that is never closed.
"""
import pathlib
import re
import sys

FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^`\s]*)\s*(.*?)\s*$")
CPP_NAMES = {"cpp", "c++", "cxx", "cc", "hpp", "c"}


def pages(root):
    yield root / "README.md"
    yield from sorted((root / "docs").rglob("*.md"))


class UnclosedFence(Exception):
    pass


def blocks(path):
    """Yields (first line number, language, extra info, code) for every fenced block; raises
    UnclosedFence when a fence is never closed (a stray fence turns the rest of a page into code)."""
    lines = path.read_text(encoding="utf-8").split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang, extra, start = m.group(2), m.group(3).lower(), m.group(4), i + 1
        j = start
        while j < len(lines) and not lines[j].strip().startswith(fence[0] * len(fence)):
            j += 1
        if j == len(lines):
            raise UnclosedFence(f"{path}:{start}: the fence opened here is never closed")
        yield start, lang, extra, "\n".join(lines[start:j])
        i = j + 1


def ident(root, path, n):
    rel = path.relative_to(root).with_suffix("")
    return re.sub(r"[^A-Za-z0-9]", "_", str(rel)) + f"_{n}"


def collect(root):
    programs, fragments, errors = [], [], []
    for path in pages(root):
        n = 0
        try:
            found = list(blocks(path))
        except UnclosedFence as e:
            errors.append(str(e).replace(str(root) + "/", ""))
            continue
        for line, lang, extra, code in found:
            if lang not in CPP_NAMES:
                continue
            where = f"{path.relative_to(root)}:{line}"
            if lang != "cpp" or extra not in ("", "fragment"):
                errors.append(f"{where}: a C++ block must be fenced ```cpp (a whole program) or ```cpp fragment, "
                              f"got ```{lang} {extra}".rstrip())
            elif extra == "fragment":
                fragments.append(where)
            else:
                n += 1
                if not re.search(r"\bint\s+main\s*\(", code):
                    errors.append(f"{where}: a ```cpp block is compiled as a whole program and needs a main(); "
                                  "fence it ```cpp fragment if it is deliberately a part")
                programs.append((ident(root, path, n), where, code))
    return programs, fragments, errors


def with_return(code):
    """The block with `return 0;` before the closing brace of its main(): inside a namespace, main
    is an ordinary function, and flowing off its end would be undefined (only ::main returns 0)."""
    m = re.search(r"\bint\s+main\s*\([^)]*\)\s*\{", code)
    depth, i, n = 0, m.end() - 1, len(code)
    while i < n:
        c = code[i]
        if code.startswith("//", i):
            i = code.find("\n", i)
            i = n if i < 0 else i
            continue
        if code.startswith("/*", i):
            i = code.find("*/", i) + 2
            continue
        if c in "\"'":
            j = i + 1
            while j < n and code[j] != c:
                j += 2 if code[j] == "\\" else 1
            i = j + 1
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return code[:i] + "  return 0;  // added by doc_programs.py\n" + code[i:]
        i += 1
    raise ValueError("main() has no closing brace")


def unit(programs):
    includes, bodies, table = [], [], []
    for name, where, code in programs:
        body = []
        for line in with_return(code).split("\n"):
            if line.lstrip().startswith("#include"):
                if line.strip() not in includes:
                    includes.append(line.strip())
                body.append("")  # keep the line numbers of the #line directive
            else:
                body.append(line)
        with_args = re.search(r"\bint\s+main\s*\(\s*int\b", code) is not None
        bodies.append(f"namespace docs_{name} {{\n#line {int(where.split(':')[1]) + 1} \"{where.split(':')[0]}\"\n"
                      + "\n".join(body) + f"\n}}  // namespace docs_{name}\n")
        call = f"docs_{name}::main(argc - 1, argv + 1)" if with_args else f"docs_{name}::main()"
        table.append(f'  if (which == "{name}") return {call};')
    return ("// Generated by tests/docs/doc_programs.py from the ```cpp blocks of README.md and docs/: do not edit.\n"
            + "\n".join(includes) + "\n#include <cstdio>\n#include <string_view>\n\n" + "\n".join(bodies)
            + "\nint main(int argc, char** argv) {\n  const std::string_view which = argc > 1 ? argv[1] : \"\";\n"
            + "\n".join(table)
            + '\n  std::fprintf(stderr, "docs_programs: unknown program \'%s\'\\n", argv[argc > 1 ? 1 : 0]);\n  return 2;\n}\n')


def main(argv):
    if len(argv) < 3:
        print(__doc__)
        return 2
    root = pathlib.Path(argv[1]).resolve()
    programs, fragments, errors = collect(root)
    for e in errors:
        print(e)
    if argv[2] == "--check":
        print(f"{len(programs)} whole program(s): " + ", ".join(w for _, w, _ in programs))
        print(f"{len(fragments)} fragment(s), not compiled: " + ", ".join(fragments))
        return 1 if errors or not programs else 0
    if errors:
        return 1
    out, listing = pathlib.Path(argv[2]), pathlib.Path(argv[3])
    text = unit(programs)
    if not out.exists() or out.read_text(encoding="utf-8") != text:
        out.write_text(text, encoding="utf-8")
    names = "".join(f"{name}\n" for name, _, _ in programs)
    if not listing.exists() or listing.read_text(encoding="utf-8") != names:
        listing.write_text(names, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
