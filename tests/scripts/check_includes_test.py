#!/usr/bin/env python3
"""scripts/check_includes.py finds what it should: in a small tree, std::snprintf behind <string>
alone and int64_t behind a third-party header alone fail, naming both files; the same uses behind
a project header that includes <cstdio> and <cstdint>, or in comments and strings, pass.

    check_includes_test.py SOURCE_DIR
"""

import os
import subprocess
import sys
import tempfile

TREE = {
    "parallel/short.cpp": '#include <string>\nvoid f(char* s) { std::snprintf(s, 4, "%d", 1); }\n',
    "engine/third.h": "#include <gtest/gtest.h>\nint64_t g();\n",
    "engine/named.h": "#pragma once\n#include <cstdint>\n#include <cstdio>\n",
    "engine/named.cpp": '#include "engine/named.h"\nint64_t h(FILE* f) { return std::fflush(f); }\n',
    "nn/quiet.cpp": '// std::printf(int64_t)\nconst char* k = "std::snprintf int64_t";\n',
}


def check(tree):
    with tempfile.TemporaryDirectory() as root:
        for path, text in tree.items():
            os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
            with open(os.path.join(root, path), "w") as f:
                f.write(text)
        return subprocess.run([sys.executable, os.path.join(sys.argv[1], "scripts/check_includes.py"),
                               root], capture_output=True, text=True)


def main():
    result = check(TREE)
    assert result.returncode == 1, result.stdout
    assert "parallel/short.cpp uses what <cstdio> declares" in result.stdout, result.stdout
    assert "engine/third.h uses what <cstdint> declares" in result.stdout, result.stdout
    assert "named" not in result.stdout and "quiet" not in result.stdout, result.stdout
    fine = {k: v for k, v in TREE.items() if k not in ("parallel/short.cpp", "engine/third.h")}
    result = check(fine)
    assert result.returncode == 0, result.stdout
    print("ok")


if __name__ == "__main__":
    main()
