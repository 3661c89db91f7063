#!/usr/bin/env python3
"""Each C++ file names the standard header of what it uses, at least through a header of this
project it includes (review H11). Tandem has only been compiled against GCC 12's libstdc++, whose
headers include more of each other than GCC 13's do (`<string>` no longer brings `<cstdint>`,
...), and Debian 12 has no GCC 13 to try; so std::snprintf in a file that includes <string> but
not <cstdio> builds here and breaks on the GPU node. Checked: the fixed-width integers need
<cstdint> (or <stdint.h>, <cinttypes>) and the stdio functions <cstdio> (or <stdio.h>), in the
file or in the project headers it includes, recursively; third-party and system headers count
for nothing, as their contents change from version to version. Each file short of one is named;
the exit status is 1 when any is, 0 otherwise.

    check_includes.py [SOURCE_DIR]        (default: the repository this script sits in)
"""

import os
import re
import sys

FOLDERS = ("engine", "nn", "data", "parallel", "apps", "examples", "microbench", "tests")
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)
NEEDS = {
    "<cstdint>": (re.compile(r"\b(?:std::)?u?int(?:8|16|32|64)_t\b|\bu?intptr_t\b"),
                  {"cstdint", "stdint.h", "cinttypes", "inttypes.h"}),
    "<cstdio>": (re.compile(r"\bstd::(?:snprintf|printf|fprintf|sscanf|fopen|fclose|fgets|fputs"
                            r"|puts|fflush|perror)\b|\b(?:popen|pclose)\s*\(|\bFILE\s*\*"),
                 {"cstdio", "stdio.h"}),
}


def code_of(text):
    """The text without comments and string literals, which may name anything."""
    text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r'"(?:[^"\\\n]|\\.)*"', '""', text)


def main():
    if sys.argv[1:2] in (["-h"], ["--help"]):
        print(__doc__.strip())
        return 0
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), ".."))
    sources = {}
    for folder in FOLDERS:
        for directory, _, names in os.walk(os.path.join(root, folder)):
            for name in names:
                if name.endswith((".h", ".cpp", ".cu", ".cuh")):
                    path = os.path.join(directory, name)
                    with open(path, errors="replace") as f:
                        sources[os.path.relpath(path, root)] = f.read()
    closures = {}

    def standard_headers(path, seen):
        """The non-project headers `path` includes, with those of its project headers."""
        found = set()
        for header in INCLUDE.findall(sources.get(path, "")):
            if header in sources:
                if header not in seen:
                    seen.add(header)
                    found |= standard_headers(header, seen)
            else:
                found.add(header)
        return found

    short = []
    for path in sorted(sources):
        code = code_of(sources[path])
        for needed, (use, headers) in NEEDS.items():
            if use.search(code):
                if path not in closures:
                    closures[path] = standard_headers(path, {path})
                if not closures[path] & headers:
                    short.append(f"includes: {path} uses what {needed} declares, but neither it nor "
                                 "a project header it includes includes it")
    for line in short:
        print(line)
    if short:
        print(f"FAILED: {len(short)} files short of a standard header (add the #include)")
        return 1
    print(f"passed: {len(sources)} files name <cstdint> and <cstdio> where they use them")
    return 0


if __name__ == "__main__":
    sys.exit(main())
