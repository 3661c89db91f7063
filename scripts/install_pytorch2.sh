#!/usr/bin/env bash
# Installs a current PyTorch 2.x from PyPI into a virtual environment outside the source tree, once,
# for scripts/compare_pytorch.sh's rows beside Debian's PyTorch 1.13 (which stays the reference in
# the tests). Prints the environment's python on its last line.
#
#   scripts/install_pytorch2.sh                    # PyTorch 2.15.0 in ~/.cache/tandem/pytorch-2.15.0
#   scripts/install_pytorch2.sh --version 2.11.0   # another release (the GPU nodes run 2.11)
#   scripts/install_pytorch2.sh --venv DIR         # another folder
#   scripts/install_pytorch2.sh --print            # only print the python of an installed one
#
# Note [PyTorch from PyPI]: PyPI's Linux wheels of torch are the CUDA builds; the CPU-only ones live
# on download.pytorch.org, which these machines cannot reach. The CUDA build runs on a CPU as well
# (torch.cuda.is_available() is then False), but it loads its CUDA libraries when imported, so
# they are installed with it: about 5.4 GB on disk and 11 to 13 minutes on 2026-11-27 (2.15.0, on
# 2 busy cores; two installs, the second with pip's cache of the wheels).
# The environment lives outside the tree so no build, clean or `git status` ever sees it, and is
# reused as long as it imports the version asked for. TANDEM_PYTORCH2_VENV also names the folder.
set -euo pipefail

version="2.15.0"
venv=""
print_only=0
usage="usage: scripts/install_pytorch2.sh [--version X.Y.Z] [--venv DIR] [--print]"
while [ $# -gt 0 ]; do
  case "$1" in
    --version | --venv)
      [ $# -ge 2 ] && [ -n "$2" ] || { echo "error: $1 needs a value ($usage)" >&2; exit 2; }
      [ "$1" = --version ] && version="$2" || venv="$2"
      shift 2 ;;
    --print) print_only=1; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "error: unknown argument '$1' ($usage)" >&2; exit 2 ;;
  esac
done
[[ "$version" =~ ^2\.[0-9]+\.[0-9]+$ ]] || { echo "error: --version takes a 2.x release such as 2.15.0, got '$version'" >&2; exit 2; }
venv="${venv:-${TANDEM_PYTORCH2_VENV:-$HOME/.cache/tandem/pytorch-$version}}"
python="$venv/bin/python"

installed() {
  [ -x "$python" ] && [ "$("$python" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null)" = "$version" ]
}

if installed; then
  echo "$python"
  exit 0
fi
if [ "$print_only" -eq 1 ]; then
  echo "error: no PyTorch $version in $venv: run scripts/install_pytorch2.sh${venv:+ --venv $venv}" >&2
  exit 1
fi

# A Python that can make a venv with pip in it: the one on PATH, else Debian's (python3-venv).
base=""
for candidate in python3 /usr/bin/python3; do
  if command -v "$candidate" >/dev/null && "$candidate" -c 'import ensurepip, venv' 2>/dev/null; then
    base="$(command -v "$candidate")"
    break
  fi
done
if [ -z "$base" ]; then
  echo "== installing python3-venv (no Python here can make a virtual environment)"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
  base=/usr/bin/python3
fi

echo "== PyTorch $version from PyPI into $venv (about 5.4 GB; Note [PyTorch from PyPI])" >&2
start=$SECONDS
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
"$base" -m venv "$venv"
"$python" -m pip install --quiet --upgrade pip >&2
"$python" -m pip install --quiet "torch==$version" numpy >&2
installed || { echo "error: PyTorch $version did not import from $venv after installing it" >&2; exit 1; }
echo "== PyTorch $version ready in $((SECONDS - start)) s, $(du -sh "$venv" | cut -f1) in $venv" >&2
echo "$python"
