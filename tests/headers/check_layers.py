#!/usr/bin/env python3
"""Layering check of the public headers: a header includes only its own layer and the layers
below it. The layers, lowest first (a folder is a layer):

    core <- {simd, format, text} <- cauchy <- linalg <- autodiff <- nn <- model
         <- {optim, checkpoint, eval, dist} <- {generate, train} <- datasets <- serve

Folders of one level (in braces) are independent: none includes another. simd (vectorised
elementwise maths), format (file formats: safetensors, config.json's fields, atomic files) and
text (a tokenizer needs no model) include only core; dist (processes training together)
includes only core and linalg (its gradient-progress interface). The umbrella headers
include/causalqwen/*.hpp may include anything; a header inside a layer may not include an
umbrella (it would pull in every layer).

Usage: check_layers.py INCLUDE_DIR. Prints one line per forbidden include
(file:line: layer 'a' includes layer 'b' (path)) and exits 1 if there is any, else prints the
number of includes checked and exits 0.
"""
import pathlib
import re
import sys

LEVEL = {"core": 0, "simd": 1, "format": 1, "text": 1, "cauchy": 2, "linalg": 3, "autodiff": 4, "nn": 5,
         "model": 6, "optim": 7, "checkpoint": 7, "eval": 7, "dist": 7, "generate": 8, "train": 8,
         "datasets": 9, "serve": 10}
ONLY = {"simd": {"core", "simd"}, "format": {"core", "format"}, "text": {"core", "text"},
        "dist": {"core", "linalg", "dist"}}  # layers allowed a narrower set than their level gives
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]causalqwen/([^>"]+)[>"]')


def allowed(source: str, target: str) -> bool:
    if source in ONLY:
        return target in ONLY[source]
    if source == target:
        return True
    return LEVEL[target] < LEVEL[source]


def main() -> int:
    root = pathlib.Path(sys.argv[1]) / "causalqwen"
    violations, checked = [], 0
    for header in sorted(root.rglob("*.hpp")):
        rel = header.relative_to(root)
        if len(rel.parts) == 1:
            continue  # an umbrella header
        source = rel.parts[0]
        if source not in LEVEL:
            violations.append(f"{header}: folder '{source}' is not a known layer (add it to LEVEL in {__file__})")
            continue
        for number, line in enumerate(header.read_text(encoding="utf-8").splitlines(), 1):
            match = INCLUDE.match(line)
            if not match:
                continue
            checked += 1
            parts = match.group(1).split("/")
            if len(parts) == 1:
                if parts[0] != "version.hpp":
                    violations.append(f"{header}:{number}: layer '{source}' includes the umbrella header "
                                      f"causalqwen/{parts[0]}")
                continue
            target = parts[0]
            if target not in LEVEL:
                violations.append(f"{header}:{number}: includes causalqwen/{match.group(1)}, not in a known layer")
            elif not allowed(source, target):
                violations.append(f"{header}:{number}: layer '{source}' includes layer '{target}' "
                                  f"(causalqwen/{match.group(1)})")
    for v in violations:
        print(v)
    if violations:
        print(f"{len(violations)} forbidden include(s) of {checked} checked")
        return 1
    print(f"layering ok: {checked} includes checked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
