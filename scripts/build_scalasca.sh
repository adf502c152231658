#!/usr/bin/env bash
# Builds Scalasca 2.6 (the reference trace analyzer, used by tests/test_scalasca.py
# and by the "scalasca" models of `waitlab evaluate`) once into the cache:
#   ${WAITLAB_CACHE:-${XDG_CACHE_HOME:-~/.cache}/waitlab}/scalasca-2.6
# from ../shared/tools/scalasca-2.6.tar.gz (or $SCALASCA_TARBALL).  Idempotent:
# a stamp file marks a finished build; a second run only checks.  Skips (exit 0)
# with one line when the tarball is absent, or when the user points waitlab at
# their own Scalasca (WAITLAB_SCALASCA=/prefix, or scout.mpi on PATH).
# Needs an MPI: Debian's libopenmpi-dev and openmpi-bin (installed here if missing).
# About 10 minutes on 2 cores; the log is kept next to the prefix.
set -euo pipefail
cd "$(dirname "$0")/.."
TARBALL=${SCALASCA_TARBALL:-../shared/tools/scalasca-2.6.tar.gz}
CACHE=${WAITLAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/waitlab}
PREFIX="$CACHE/scalasca-2.6"
STAMP="$PREFIX/.waitlab-built"
LOG="$CACHE/scalasca-2.6-build.log"

if [ -n "${WAITLAB_SCALASCA:-}" ]; then
  echo "build_scalasca: WAITLAB_SCALASCA=$WAITLAB_SCALASCA is set; not building"
  exit 0
fi
if [ -f "$STAMP" ] && [ -x "$PREFIX/bin/scout.mpi" ]; then
  exit 0
fi
if command -v scout.mpi >/dev/null 2>&1; then
  echo "build_scalasca: scout.mpi found on PATH ($(command -v scout.mpi)); not building"
  exit 0
fi
if [ ! -f "$TARBALL" ]; then
  echo "build_scalasca: $TARBALL not found; skipping (the Scalasca cross-check tests will be skipped)"
  exit 0
fi

. scripts/apt_need.sh
apt_need build_scalasca libopenmpi-dev openmpi-bin

mkdir -p "$CACHE"
WORK=$(mktemp -d "$CACHE/scalasca-build.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
echo "build_scalasca: building Scalasca 2.6 into $PREFIX (about 10 minutes; log: $LOG)"
{
  tar xzf "$TARBALL" -C "$WORK"
  mkdir "$WORK/build"
  cd "$WORK/build"
  ../scalasca-2.6/configure --prefix="$PREFIX" --with-mpi=openmpi --without-sionlib
  make -j"${JOBS:-2}"
  make install
} >"$LOG" 2>&1 || {
  echo "build_scalasca: build failed; see the end of $LOG" >&2
  tail -n 20 "$LOG" >&2
  exit 1
}
touch "$STAMP"
echo "build_scalasca: done: $PREFIX/bin/scout.mpi"
