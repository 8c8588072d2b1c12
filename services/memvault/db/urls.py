"""Connection URLs for the two roles: the owner (migrations, admin) and the app role (requests)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.engine import URL, make_url


@dataclass(frozen=True)
class DatabaseUrls:
    owner: URL
    app: URL
    # True when the app URL logs in as the owner and must SET ROLE to the app role on connect.
    set_role: str | None = None
    embedded: bool = False


def _driver(url: str | URL, driver: str) -> URL:
    return make_url(url).set(drivername=f"postgresql+{driver}")  # make_url returns a URL as it is


def libpq(url: str | URL) -> str:
    """``url`` as libpq (psycopg.connect) takes it: SQLAlchemy's driver name dropped, the password
    kept, the query (a socket folder as ``host``) as it was."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def resolve(database_url: str, app_database_url: str | None, app_role: str, *, embedded: bool) -> DatabaseUrls:
    owner = _driver(database_url, "psycopg")
    if app_database_url:
        return DatabaseUrls(owner=owner, app=_driver(app_database_url, "psycopg"), embedded=embedded)
    if embedded:
        # The embedded server trusts local socket logins, so the app role logs in as itself.
        return DatabaseUrls(owner=owner, app=owner.set(username=app_role, password=None), embedded=True)
    return DatabaseUrls(owner=owner, app=owner, set_role=app_role)
