#!/usr/bin/env python3
"""Loops of rooms inside a folder: room_cycles.py ROOT FOLDER [FOLDER ...]

A room is a .cpp with its .h (the path without its extension); room A points at room B when a file
of A includes a header of B ("#include "parallel/comm/work.h""). A loop of rooms (a strongly
connected set of two or more) means neither side can be read, built or tested first; each is
printed with the includes that close it, and the exit status is 1 when there is any. This is how
the architecture reviews count back-edges (docs/parallel.md); Layering.NoLoopsOfRooms runs it on
nn/, data/, parallel/ and apps/ (engine/ keeps a few known, explained knots: the reviews list them).
"""

import argparse
import re
import sys
from pathlib import Path

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)
SOURCES = (".h", ".cpp", ".cu", ".cuh")


def rooms_and_edges(root, folders):
    """{room: {room it includes: [(file, include)]}} of the sources under `folders`."""
    edges = {}
    for folder in folders:
        for path in sorted((root / folder).rglob("*")):
            if path.suffix not in SOURCES:
                continue
            file = path.relative_to(root).as_posix()
            room = file.rsplit(".", 1)[0]
            edges.setdefault(room, {})
            for include in INCLUDE.findall(path.read_text(encoding="utf-8", errors="replace")):
                target = include.rsplit(".", 1)[0]
                if target != room and any(include.startswith(f.rstrip("/") + "/") for f in folders):
                    edges[room].setdefault(target, []).append((file, include))
    return edges


def loops(edges):
    """The strongly connected sets of two or more rooms (Tarjan's algorithm, iterative)."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(edges.get(start, {})))]
        index[start] = low[start] = counter[0]; counter[0] += 1
        stack.append(start); on_stack.add(start)
        while work:
            room, targets = work[-1]
            advanced = False
            for target in targets:
                if target not in index:
                    index[target] = low[target] = counter[0]; counter[0] += 1
                    stack.append(target); on_stack.add(target)
                    work.append((target, iter(edges.get(target, {}))))
                    advanced = True
                    break
                if target in on_stack:
                    low[room] = min(low[room], index[target])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[room])
            if low[room] == index[room]:
                component = []
                while True:
                    member = stack.pop(); on_stack.discard(member); component.append(member)
                    if member == room:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0],
                                     epilog="\n".join(__doc__.strip().splitlines()[2:]))
    parser.add_argument("root", help="the checkout")
    parser.add_argument("folders", nargs="+", help="folders under ROOT, e.g. parallel")
    args = parser.parse_args()
    edges = rooms_and_edges(Path(args.root), args.folders)
    found = loops(edges)
    for component in found:
        members = set(component)
        closing = [f"{file} includes {include}" for room in component
                   for target, lines in edges[room].items() if target in members
                   for file, include in lines]
        print(f"room_cycles: a loop of {len(component)} rooms: {', '.join(component)} "
              f"({'; '.join(closing)})")
    print(f"room_cycles: {len(edges)} rooms in {', '.join(args.folders)}, {len(found)} loops")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
