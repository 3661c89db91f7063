"""What scripts/plot_bench.py and scripts/plot_training.py share: matplotlib, headless, or one line
that names the python which lacks it and the fix that applies.

Note [Which python plots]: the plot scripts start with `#!/usr/bin/env python3`, the first
python3 on PATH. That is pyenv's or conda's where one is installed, often without matplotlib,
while Debian's /usr/bin/python3 has it (python3-matplotlib, from scripts/install_deps.sh).
Hard-coding /usr/bin/python3 would fix that case but break the others: an activated venv or
conda environment that does have matplotlib, macOS, NixOS. So the shebang stays, and when
matplotlib is missing the script runs itself again with /usr/bin/python3 when that one has it
(saying so in one line on stderr), so the README's commands work as written; otherwise one line
says which interpreter ran and how to install matplotlib, rather than advising to install a
package that is already there.
"""

import os
import shlex
import subprocess
import sys

SYSTEM_PYTHON = "/usr/bin/python3"


def pyplot(program):
    """matplotlib.pyplot, drawing to files only (no display needed); exits with one line when
    this python has no matplotlib."""
    try:
        import matplotlib
    except ImportError:
        here = sys.executable or "this python"
        if here != SYSTEM_PYTHON and system_python_has_matplotlib():
            print(f"{program}: {here} cannot import matplotlib; running with {SYSTEM_PYTHON}",
                  file=sys.stderr)
            sys.stderr.flush()
            os.execv(SYSTEM_PYTHON, [SYSTEM_PYTHON] + sys.argv)
        sys.exit(missing_matplotlib(program))
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def system_python_has_matplotlib():
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        return False
    try:
        probe = subprocess.run([SYSTEM_PYTHON, "-c", "import matplotlib"], capture_output=True,
                               timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def missing_matplotlib(program):
    """The one-line error for a python without matplotlib (Note [Which python plots])."""
    here = sys.executable or "this python"
    if here != SYSTEM_PYTHON and system_python_has_matplotlib():
        again = " ".join(shlex.quote(arg) for arg in [SYSTEM_PYTHON] + sys.argv)
        return (f"{program}: {here} cannot import matplotlib, but {SYSTEM_PYTHON} can: "
                f"run {again}")
    if here == SYSTEM_PYTHON:
        return (f"{program}: {here} cannot import matplotlib: apt-get install python3-matplotlib "
                f"(or scripts/install_deps.sh)")
    return (f"{program}: {here} cannot import matplotlib, nor can {SYSTEM_PYTHON}: "
            f"{shlex.quote(here)} -m pip install matplotlib, or apt-get install python3-matplotlib "
            f"and run this with {SYSTEM_PYTHON}")
