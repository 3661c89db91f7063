#!/usr/bin/env python3
"""Prints one line "KEY FILE" per source file: the key of everything clang-tidy's verdict on FILE
depends on, for scripts/check_style.sh's cache of clean results (Note [clang-tidy cache] there).

    scripts/tidy_keys.py BUILD_DIR FILE...

The key hashes the clang-tidy and compiler versions, .clang-tidy, the file's compile command and
the file preprocessed with its comments kept (-E -C): the text of every header it includes, the
NOLINT comments and every macro's value. So a change to a header changes the key of each file that
includes it, and nothing else does. The checkout's and the build's folders are replaced by
placeholders first, so a clone in another folder finds the same keys.
"""
import concurrent.futures
import functools
import hashlib
import json
import os
import shlex
import subprocess
import sys


def command_for(entry):
    """The compile command as a list, whichever form compile_commands.json used."""
    if "arguments" in entry:
        return list(entry["arguments"])
    return shlex.split(entry["command"])


def preprocess_command(arguments):
    """The compile command turned into one that writes the preprocessed text to stdout."""
    result, skip_next = [], False
    for argument in arguments:
        if skip_next:
            skip_next = False
        elif argument == "-o":
            skip_next = True
        elif argument == "-c":
            result += ["-E", "-C"]
        else:
            result.append(argument)
    return result


@functools.lru_cache(maxsize=None)
def version(tool):
    return subprocess.run([tool, "--version"], capture_output=True, text=True, check=True).stdout


def main():
    if sys.argv[1:2] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    if len(sys.argv) < 3:
        sys.exit("usage: tidy_keys.py BUILD_DIR FILE...")
    build = os.path.realpath(sys.argv[1])
    root = os.path.realpath(os.path.join(os.path.dirname(__file__), ".."))
    with open(os.path.join(build, "compile_commands.json")) as file:
        entries = {os.path.realpath(e["file"]): e for e in json.load(file)}
    with open(os.path.join(root, ".clang-tidy"), "rb") as file:
        common = version("clang-tidy").encode() + file.read()

    def normalise(data):
        # The build folder first: it may lie inside the checkout.
        return data.replace(build.encode(), b"@BUILD@").replace(root.encode(), b"@ROOT@")

    def key(path):
        entry = entries[os.path.realpath(os.path.join(root, path))]
        arguments = command_for(entry)
        digest = hashlib.sha256(common)
        digest.update(version(arguments[0]).encode())
        digest.update(normalise("\0".join(arguments).encode()))
        preprocessed = subprocess.run(preprocess_command(arguments), cwd=entry["directory"],
                                      capture_output=True, check=True).stdout
        digest.update(normalise(preprocessed))
        return digest.hexdigest()

    paths = sys.argv[2:]
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count()) as pool:
        for path, digest in zip(paths, pool.map(key, paths)):
            print(digest, path)


if __name__ == "__main__":
    main()
