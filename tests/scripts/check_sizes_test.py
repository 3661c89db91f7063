#!/usr/bin/env python3
"""scripts/check_sizes.py finds what it should: a tree with a 61-line function (behind the
things a brace matcher trips on: braces in strings, comments, raw strings and initialiser lists),
a 501-line file and a function of exactly 60 lines must fail naming the first two and not the
third; the same tree without them passes.

    check_sizes_test.py SOURCE_DIR
"""

import os
import subprocess
import sys
import tempfile

TRICKY_PREFIX = r'''#include "x.h"
namespace tandem {
namespace {
const char* kBrace = "{ not a body";  // } nor this
constexpr char kOpen = '{';
const auto kRaw = R"json({"a": {"b": 1}})json";
/* a comment with a function(int) { in it */
struct Table { int a; int b; };
const Table kTables[] = {{1, 2}, {3, 4}};
}  // namespace

class Widget : public Base {
 public:
  Widget(int a, int b) : a_{a}, b_(b) {
    if (a > b) { a_ = b; }
  }
  int get() const { return a_; }
 private:
  int a_{0};
  int b_ = 1;
};
'''


def function(name, lines):
    """A function whose definition spans `lines` lines, from its name to its closing brace."""
    body = [f"  total += {i};" for i in range(lines - 3)]
    return "\n".join([f"int {name}(int total) {{"] + body + ["  return total;", "}"]) + "\n"


def run(root):
    script = os.path.join(SOURCE_DIR, "scripts", "check_sizes.py")
    done = subprocess.run([sys.executable, script, root], capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr


def write(root, path, text):
    os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
    with open(os.path.join(root, path), "w") as out:
        out.write(text)


def main():
    failures = []
    with tempfile.TemporaryDirectory() as root:
        write(root, "nn/long.cpp",
              TRICKY_PREFIX + function("just_right", 60) + function("too_long", 61) + "}  // namespace tandem\n")
        write(root, "data/big.h", "// filler\n" * 501)
        write(root, "tests/huge_test.cpp", "// outside the rule\n" * 900)
        status, output = run(root)
        expected = ["nn/long.cpp:", "too_long is 61 lines", "data/big.h: 501 lines"]
        if status != 1:
            failures.append(f"exit status {status}, expected 1")
        failures += [f"output lacks '{text}'" for text in expected if text not in output]
        failures += [f"output names '{text}'" for text in ("just_right", "Widget", "huge_test")
                     if text in output]
        write(root, "nn/long.cpp", TRICKY_PREFIX + function("just_right", 60) + "}  // namespace tandem\n")
        write(root, "data/big.h", "// filler\n" * 500)
        status, clean = run(root)
        if status != 0:
            failures.append(f"the tree within the limits fails: {clean}")
    if failures:
        print("FAILED: check_sizes.py " + "; ".join(failures) + "\n--- its output:\n" + output)
        return 1
    print("passed: check_sizes.py names a 61-line function and a 501-line file, and passes 60 and 500")
    return 0


SOURCE_DIR = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

if __name__ == "__main__":
    sys.exit(main())
