#!/usr/bin/env python3
"""Every relative link of README.md and docs/**/*.md resolves: the file or folder exists, and a
#anchor names a heading of the target page (GitHub's rule: lower case, punctuation dropped,
spaces to hyphens, -1, -2, ... for repeats) or an explicit <a id="..."> / <a name="...">.

    check_links.py ROOT

Links inside code blocks and inline code are not links. http(s) and mailto links are not followed
(nothing downloads in the tests). Prints each broken link as file:line and exits 1 if any.
"""
import pathlib
import re
import sys

LINK = re.compile(r"(?<!\!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
IMAGE = re.compile(r"!\[[^\]]*\]\(\s*<?([^)\s>]+)>?\s*\)")
REFDEF = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)")
FENCE = re.compile(r"^\s*(`{3,}|~{3,})")


def prose_lines(text, blank_code=True):
    """Yields (line number, line) outside fenced code, with inline code blanked unless told not to."""
    fence = None
    for number, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if m:
            if fence is None:
                fence = m.group(1)[0] * len(m.group(1))
                continue
            if line.strip().startswith(fence):
                fence = None
                continue
        if fence is None and not blank_code:
            yield number, line
        elif fence is None:
            yield number, re.sub(r"(`+)(?:(?!\1).)+?\1", lambda c: " " * len(c.group(0)), line)


def slug(heading):
    s = heading.strip().lower()
    s = re.sub(r"<[^>]+>", "", s)
    s = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", s)
    s = s.replace("`", "")
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(path):
    found, counts = set(), {}
    for _, line in prose_lines(path.read_text(encoding="utf-8"), blank_code=False):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            base = slug(m.group(1))
            n = counts.get(base, 0)
            counts[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
        for a in re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", line):
            found.add(a)
    return found


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    root = pathlib.Path(argv[1]).resolve()
    pages = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    cache, broken, count = {}, [], 0
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for number, line in prose_lines(text):
            targets = LINK.findall(line) + IMAGE.findall(line) + REFDEF.findall(line)
            for target in targets:
                if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
                    continue  # http:, https:, mailto:
                count += 1
                where = f"{page.relative_to(root)}:{number}"
                file_part, _, anchor = target.partition("#")
                dest = (page.parent / file_part).resolve() if file_part else page
                if not dest.exists():
                    broken.append(f"{where}: {target}: no such file or folder")
                    continue
                try:
                    dest.relative_to(root)
                except ValueError:
                    broken.append(f"{where}: {target}: points outside the repository")
                    continue
                if anchor:
                    if dest.suffix != ".md":
                        if not re.fullmatch(r"L\d+(-L\d+)?", anchor):
                            broken.append(f"{where}: {target}: an anchor into a file that is not Markdown")
                        continue
                    if dest not in cache:
                        cache[dest] = anchors(dest)
                    if anchor not in cache[dest]:
                        broken.append(f"{where}: {target}: {dest.relative_to(root)} has no heading #{anchor}")
    for b in broken:
        print(b)
    print(f"{count} relative link(s) in {len(pages)} page(s), {len(broken)} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
