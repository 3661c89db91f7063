#!/usr/bin/env bash
# Installs the Debian packages Tandem builds against, only those missing, then oneDNN 3.2 from
# PyPI into a prefix outside the tree (scripts/install_onednn.sh; Note [oneDNN from PyPI]).
# Idempotent and non-interactive; needs root (or sudo) only when a Debian package is missing.
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac

packages=(
  cmake g++ make
  ninja-build ccache   # scripts/build_env.sh: how CI fits its budget (Note [Compiler cache])
  libdnnl-dev          # oneDNN 2.6 (Debian's), for -DTANDEM_ONEDNN=2; the default 3.2 comes from PyPI below
  python3-pip          # fetches oneDNN 3.2 (scripts/install_onednn.sh)
  ocl-icd-opencl-dev opencl-c-headers  # Debian's oneDNN CMake config asks for OpenCL (its GPU runtime)
  libgloo-dev          # Gloo: the CPU process group (DDP over TCP)
  libopenmpi-dev openmpi-bin  # Open MPI: the mpi process group (--backend mpi) and mpirun
  libcli11-dev         # CLI11: train_cifar's flags
  libssl-dev           # OpenSSL's libcrypto: HMAC-SHA256 for the rendezvous store's job token
  nlohmann-json3-dev   # safetensors headers
  libgtest-dev libgmock-dev
  libbenchmark-dev
  python3-torch        # PyTorch (CPU) reference: loads Tandem checkpoints in tests/interop
  python3-matplotlib   # scripts/plot_bench.py and plot_training.py draw results and curves
  clang libclang-rt-14-dev  # libFuzzer and its sanitizers (scripts/fuzz.sh)
  clang-format clang-tidy shellcheck  # scripts/check_style.sh
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "== dependencies: all present"
else
  echo "== dependencies: installing ${missing[*]}"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "error: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    sudo="sudo"
  fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
"$(dirname "${BASH_SOURCE[0]}")/install_onednn.sh"
