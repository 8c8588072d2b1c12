"""Run Alembic migrations programmatically, as the owner role."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, pool, text
from sqlalchemy.engine import URL

MIGRATIONS = Path(__file__).parent / "migrations"


def alembic_config(owner_url: URL, app_role: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", owner_url.render_as_string(hide_password=False).replace("%", "%%"))
    cfg.set_main_option("memvault.app_role", app_role)
    return cfg


# Issue 26 (Kubernetes): the migrate Job and api replicas starting at once (`memvault serve`
# upgrades too) would each run the same migration, and all but one fail. A session-level advisory
# lock makes the later ones wait, then find the schema at head. The key spells "memvault".
MIGRATION_LOCK = int.from_bytes(b"memvault", "big")


def upgrade(owner_url: URL, app_role: str, *, allow_login: bool = False) -> None:
    lock_engine = create_engine(owner_url, poolclass=pool.NullPool)
    try:
        # Autocommit: the waiting session holds no snapshot that a migration would wait for.
        with lock_engine.connect().execution_options(isolation_level="AUTOCOMMIT") as lock:
            lock.execute(text("SELECT pg_advisory_lock(:key)"), {"key": MIGRATION_LOCK})
            try:
                command.upgrade(alembic_config(owner_url, app_role), "head")
            finally:
                lock.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": MIGRATION_LOCK})
    finally:
        lock_engine.dispose()
    if allow_login:
        # Only the embedded server lets the app role log in by itself (trust auth on a private
        # socket); on a managed server the operator creates the login and passes its URL.
        engine = create_engine(owner_url, poolclass=pool.NullPool)
        with engine.begin() as conn:
            conn.execute(text(f"ALTER ROLE {app_role} LOGIN"))
        engine.dispose()


def current_revision(owner_url: URL) -> str | None:
    engine = create_engine(owner_url, poolclass=pool.NullPool)
    try:
        with engine.connect() as conn:
            exists = conn.execute(text("SELECT to_regclass('alembic_version') IS NOT NULL")).scalar_one()
            if not exists:
                return None
            return conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one_or_none()
    finally:
        engine.dispose()
