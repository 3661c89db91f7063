#!/usr/bin/env python3
"""The size limits of STYLE.md, checked: no function over 60 lines and no file over 500 lines in
the library and program folders (engine, nn, data, parallel, apps). Each one over is named with
its path, line and size; the exit status is 1 when any is over, 0 otherwise.

    check_sizes.py [SOURCE_DIR]            (default: the repository this script sits in)

Rules
- Files: every .h, .cpp, .cu and .cuh under the folders above, lines counted as `wc -l` does.
  Tests, microbenchmarks, examples and scripts are outside the rule; these folders hold no
  generated or third-party sources (generated ones, such as apps/common/version.cpp, are written
  into the build folder, and third-party code comes from packages).
- Functions: a function is measured from the line of its name (the line of the first "(" of its
  head) to the line of its closing brace, both counted, as `ctags` end - line + 1 does. Functions
  are definitions at namespace or class scope: free functions, member functions, constructors,
  operators, and lambdas bound at namespace scope. A lambda or a local class inside a function
  counts towards that function's lines, as it does in a reader's eyes.
- Exceptions are listed below, each with its reason; one that is no longer needed is reported
  (as a note, so that a branch that shrinks the file does not break another's merge).

How: a brace matcher on the source with comments, string and character literals and
preprocessor lines blanked out (newlines kept, so positions keep their lines). A "{" at namespace
or class scope opens a function body when its head (the text since the last ";", or since the
enclosing "{") holds balanced parentheses and ends, qualifiers aside, with ")" or with a
constructor's initialiser list; a trailing return type ("-> T") counts as well. Braces inside a
head (brace-initialised members in an initialiser list, "= {...}" tables) are initialisers.
Simple on purpose: it needs only Python, runs in well under a second, and agrees with
`ctags --fields=+ne` on the functions over 40 lines of this tree.
"""

import os
import re
import sys

FOLDERS = ("engine", "nn", "data", "parallel", "apps")
EXTENSIONS = (".h", ".cpp", ".cu", ".cuh")
MAX_FUNCTION_LINES = 60
MAX_FILE_LINES = 500

# Exceptions, each with its reason; none since 2026-11-28 (launcher.cpp and tandem_run's run() were
# split). Add one only for a split that waits on another branch, and drop it when that lands.
# path -> reason.
FILE_EXCEPTIONS = {}
# (path, function name) -> reason.
FUNCTION_EXCEPTIONS = {}

DECLARES_SCOPE = re.compile(r"\s*(\btemplate\s*<.*>\s*)?\b(namespace|enum|class|struct|union|extern)\b",
                            re.DOTALL)
QUALIFIERS = re.compile(r"(\s*\b(const|noexcept|override|final|mutable|try|volatile)\b|\s*&&?)*\s*$")


def blank(match):
    """The match replaced by spaces, its newlines kept."""
    return re.sub(r"[^\n]", " ", match.group(0))


def strip_source(text):
    """Comments, literals and preprocessor lines blanked: only code keeps its characters."""
    token = re.compile(
        r'R"(?P<delim>[^()\\\s]{0,16})\(.*?\)(?P=delim)"'  # raw string
        r"|//[^\n]*"  # line comment
        r"|/\*.*?\*/"  # block comment
        r'|"(?:\\.|[^"\\\n])*"'  # string
        r"|(?<![0-9A-Za-z_])'(?:\\.|[^'\\\n])+'"  # character (not a digit separator: 1'000)
        r"|^[ \t]*#(?:[^\n]*\\\n)*[^\n]*",  # preprocessor line, continuations included
        re.DOTALL | re.MULTILINE,
    )
    return token.sub(blank, text)


def collapse_braces(head):
    """A head with its nested brace groups (initialisers) reduced to "{}"."""
    previous = None
    while previous != head:
        previous = head
        head = re.sub(r"\{[^{}]*\}", "{}", head)
    return head


def without_access(head):
    """A class member's head without the "public:" before it."""
    return re.sub(r"^\s*((public|private|protected)\s*:(?!:)\s*)+", "", head)


def is_function_head(head):
    """Whether a "{" after this head (a namespace- or class-scope statement) opens a function body."""
    head = collapse_braces(head)
    if "(" not in head or head.count("(") != head.count(")"):
        return False  # a class, namespace, enum or table; or "f({" (an initialiser argument)
    if DECLARES_SCOPE.match(head):
        if not re.search(r"\)\s*$", QUALIFIERS.sub("", head)):
            return False  # "struct X : Base<decltype(y)>" is a class, "struct X f() {" a function
    rest = QUALIFIERS.sub("", head)
    if re.search(r"\)\s*$", rest) or re.search(r"\)\s*(->[^;]*)$", rest):
        return True
    # A constructor's initialiser list: "X::X(int a) : a_(a), b_{}" ends in ")" or "{}".
    return bool(re.search(r"\)\s*:(?!:)", head)) and bool(re.search(r"(\)|\{\})\s*$", rest))


def function_name(head):
    """The name before the head's first "(" at depth 0, for the report."""
    before = collapse_braces(head).split("(", 1)[0]
    words = re.findall(r"[~A-Za-z_][A-Za-z_0-9:]*(?:operator\s*\S+)?", before)
    return words[-1] if words else "?"


def functions(code):
    """(name, first line, last line) of each function in stripped source."""
    found = []
    line_of = [0] * (len(code) + 1)
    line = 1
    for index, char in enumerate(code):
        line_of[index] = line
        if char == "\n":
            line += 1
    # One frame per open brace: its kind and, for scopes, where the current statement began.
    stack = [{"kind": "scope", "head": 0}]
    index = 0
    while index < len(code):
        char = code[index]
        frame = stack[-1]
        if frame["kind"] == "function":
            # Inside a body only the matching brace matters.
            if char == "{":
                frame["depth"] += 1
            elif char == "}":
                frame["depth"] -= 1
                if frame["depth"] == 0:
                    found.append((frame["name"], frame["line"], line_of[index]))
                    stack.pop()
                    stack[-1]["head"] = index + 1
        elif frame["kind"] == "init":
            if char == "{":
                stack.append({"kind": "init"})
            elif char == "}":
                stack.pop()  # the enclosing head goes on: "a_{x}, b_(y) {" is one head
        elif char == ";":
            frame["head"] = index + 1
        elif char == "{":
            raw = code[frame["head"]:index]
            head = without_access(raw)
            if is_function_head(head):
                paren = frame["head"] + len(raw) - len(head) + head.index("(")
                stack.append({"kind": "function", "depth": 1, "name": function_name(head),
                              "line": line_of[paren]})
            elif not DECLARES_SCOPE.match(without_access(head)):
                stack.append({"kind": "init"})  # "= {...}", "kX{...}", "a_{x}" in an initialiser list
            else:
                stack.append({"kind": "scope", "head": index + 1})  # namespace, class, enum, extern
        elif char == "}":
            if len(stack) > 1:
                stack.pop()
            stack[-1]["head"] = index + 1
        index += 1
    return found


def sources(root):
    for folder in FOLDERS:
        for directory, _, names in os.walk(os.path.join(root, folder)):
            for name in sorted(names):
                if name.endswith(EXTENSIONS):
                    path = os.path.join(directory, name)
                    yield os.path.relpath(path, root)


def main():
    if sys.argv[1:2] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    over = []
    used_exceptions = set()
    files = functions_seen = 0
    for path in sorted(sources(root)):
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as file:
            text = file.read()
        files += 1
        lines = text.count("\n")
        if lines > MAX_FILE_LINES:
            if path in FILE_EXCEPTIONS:
                used_exceptions.add(path)
            else:
                over.append(f"{path}: {lines} lines, over the {MAX_FILE_LINES}-line limit for a file")
        for name, first, last in functions(strip_source(text)):
            functions_seen += 1
            size = last - first + 1
            if size <= MAX_FUNCTION_LINES:
                continue
            if (path, name) in FUNCTION_EXCEPTIONS:
                used_exceptions.add((path, name))
            else:
                over.append(f"{path}:{first}: {name} is {size} lines, over the {MAX_FUNCTION_LINES}-line limit "
                            "for a function")
    for exception in sorted(set(FILE_EXCEPTIONS) | set(FUNCTION_EXCEPTIONS), key=str):
        if exception not in used_exceptions:
            print(f"note: the exception for {exception} is no longer needed; remove it from {__file__}")
    for line in over:
        print(f"sizes: {line}")
    if over:
        print(f"FAILED: {len(over)} over the limits of STYLE.md (split them; see the rules atop {__file__})")
        return 1
    print(f"passed: {files} files in {', '.join(FOLDERS)}, none over {MAX_FILE_LINES} lines; "
          f"{functions_seen} functions, none over {MAX_FUNCTION_LINES} lines "
          f"({len(used_exceptions)} listed exceptions)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
