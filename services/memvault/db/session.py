"""Engines and the tenant transaction: the only way request code reaches PostgreSQL."""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from sqlalchemy import event, text
from sqlalchemy import exc as sa_exc
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.pool import NullPool

from memvault.db import planned
from memvault.db.urls import DatabaseUrls
from memvault.errors import DatabaseUnavailable
from memvault.plans.cputurns import FairConnection

if TYPE_CHECKING:
    import psycopg

log = logging.getLogger(__name__)

# psycopg turns a statement's %(name)s placeholders into $n on every execute, and remembers the
# result only for statements up to 4,096 bytes and 50 parameters, a cap meant for ORM-generated
# INSERTs that differ on every call. The hybrid search statement is one of a few dozen fixed
# shapes of up to ~36 KB (every filter, twice: the nearest rows in and out of the HNSW graph,
# migration 0036) and ~140 parameters: re-splitting it cost about 1.5 ms of Python per search
# (docs/benchmarks.md). These caps still leave a bulk INSERT's thousands of parameters uncached.
# Both names are psycopg's module constants (psycopg/_queries.py), read at each conversion;
# psycopg's own LRU (128 statements) bounds the memory.
STATEMENT_CACHE_BYTES = 48 * 1024
STATEMENT_CACHE_PARAMS = 256


def cache_long_statements() -> bool:
    """Let psycopg remember the conversion of statements up to ``STATEMENT_CACHE_BYTES`` and
    ``STATEMENT_CACHE_PARAMS``. False (and nothing changed) if psycopg no longer has those knobs."""
    from psycopg import _queries

    knobs = ("MAX_CACHED_STATEMENT_LENGTH", "MAX_CACHED_STATEMENT_PARAMS")
    if not all(isinstance(getattr(_queries, k, None), int) for k in knobs):
        log.warning("psycopg has no statement-conversion cache limits to raise; long statements stay uncached")
        return False
    _queries.MAX_CACHED_STATEMENT_LENGTH = max(_queries.MAX_CACHED_STATEMENT_LENGTH, STATEMENT_CACHE_BYTES)
    _queries.MAX_CACHED_STATEMENT_PARAMS = max(_queries.MAX_CACHED_STATEMENT_PARAMS, STATEMENT_CACHE_PARAMS)
    return True


AfterCommit = Callable[[], Any]

# Whether the tenant transaction running in this context is on Citus, where the system tenant's
# shared memories sit on a shard of their own: there a read takes them in a statement of its own
# (memories/split.py) and the tenant's statements name the tenant alone, so that each is routed to
# one worker. Set by Database.tenant_tx for its block; read by the memories repositories.
_system_apart: ContextVar[bool] = ContextVar("memvault_system_apart", default=False)
# Whether it is on Citus at all (also while reading as the system tenant, reading_as_system).
_on_citus: ContextVar[bool] = ContextVar("memvault_on_citus", default=False)


def on_citus() -> bool:
    """Whether the tenant transaction running in this context is on a Citus coordinator."""
    return _on_citus.get()


def system_apart() -> bool:
    """Whether reads in this context leave the system tenant's rows to a statement of their own."""
    return _system_apart.get()


@asynccontextmanager
async def reading_as_system(session: AsyncSession, tenant_id: uuid.UUID) -> AsyncIterator[None]:
    """For the block, the transaction reads as the system tenant (``app.tenant_id``, which the
    Citus versions of the search functions read, migration 0035) with the one-node read shape,
    whose statements then name the system tenant alone; the tenant ``tenant_id`` is set back after."""
    from memvault.principal import SYSTEM_TENANT_ID

    token = _system_apart.set(False)
    await set_local(session, {"app.tenant_id": str(SYSTEM_TENANT_ID)})
    try:
        yield
    finally:
        _system_apart.reset(token)
        await set_local(session, {"app.tenant_id": str(tenant_id)})


async def _bind_on_client(session: AsyncSession) -> None:
    """On Citus, the connection's statements carry their values in their text (psycopg's client-side
    binding) rather than as parameters. Citus plans a tenant's statement for the one worker of its
    tenant from the tenant's value, and for the search's statements (functions in FROM and in the
    select list, correlated subqueries) it cannot do so from a parameter: "could not create
    distributed plan". The coordinator plans each statement anyway; one node keeps server-side
    parameters and its prepared statements."""
    import psycopg

    connection = await session.connection()
    driver = (await connection.get_raw_connection()).driver_connection
    assert driver is not None
    if driver.cursor_factory is not psycopg.AsyncClientCursor:
        driver.cursor_factory = psycopg.AsyncClientCursor


async def _is_citus(session: AsyncSession) -> bool:
    found = await session.scalar(text("SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')"))
    return bool(found)


# SQLSTATEs of a server going away or not taking connections yet: admin, crash and fast shutdowns,
# "the database system is starting up", too many connections. Class 08 (connection exception) too.
_GONE_STATES = frozenset({"57P01", "57P02", "57P03", "53300"})
# A Citus shard's table: the distributed table's name and the shard's id (memories_102008). The
# tables on one node never end in digits.
_SHARD_TABLE = re.compile(r"[a-z_]+_\d{4,}")
# A worker's error relayed by the Citus coordinator keeps its SQLSTATE and message but not its
# diagnostic fields (no table name): the table is read from PostgreSQL's message instead.
_VIOLATION_TABLE = re.compile(r'on table "([a-z_0-9]+)"')


def _violated_table(orig: psycopg.Error) -> str:
    if orig.diag.table_name:
        return orig.diag.table_name
    found = _VIOLATION_TABLE.search(orig.diag.message_primary or str(orig))
    return found.group(1) if found else ""


def unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` means the database cannot be reached, rather than that a statement failed:
    a refused or broken connection, a server shutting down or starting up, no pooled connection
    free in time. Such a request is answered 503 ``database_unavailable``, not 500."""
    if isinstance(exc, sa_exc.TimeoutError):  # the pool's checkout timeout
        return True
    if not isinstance(exc, sa_exc.DBAPIError):
        return False
    if exc.connection_invalidated:
        return True
    import psycopg

    orig = exc.orig
    if isinstance(orig, psycopg.errors.ForeignKeyViolation) and _SHARD_TABLE.fullmatch(_violated_table(orig)):
        # On Citus, a write whose transaction spans a blocking shard move (`isolate-tenant --mode
        # block_writes`): its first rows went to the old shards, the next to the new ones, where the
        # first are not (docs/scaling.md). Nothing was written; the same request again succeeds.
        return True
    if not isinstance(orig, psycopg.OperationalError | psycopg.InterfaceError):
        return False
    state = getattr(orig, "sqlstate", None)
    # No SQLSTATE: the client's own "connection failed" / "the connection is closed".
    return state is None or state.startswith("08") or state in _GONE_STATES


@asynccontextmanager
async def _reachable() -> AsyncIterator[None]:
    """Turn a lost or refused database connection into ``DatabaseUnavailable``."""
    try:
        yield
    except (sa_exc.DBAPIError, sa_exc.TimeoutError) as exc:
        if unavailable(exc):
            raise DatabaseUnavailable() from exc
        raise


# A setting's name (`app.tenant_id`, `hnsw.ef_search`) and its values: identifiers, numbers, ids and
# UUIDs. Anything else is refused rather than quoted, since the value is written into the SQL.
_SETTING_NAME = re.compile(r"^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)?$")
_SETTING_VALUE = re.compile(r"^[A-Za-z0-9_.:-]*$")


# Every tenant transaction's: no compiling to machine code. PostgreSQL JIT-compiles a statement
# whose estimated cost passes jit_above_cost (100,000), and an unfiltered search's kept plan is
# estimated at about 230,000 among a few thousand memories: where PostgreSQL has LLVM (Debian's
# packages and the official images built on them, most managed services) each such search compiled
# its 418 expressions, 170-220 ms of CPU, to run a statement that takes 7 ms (docs/benchmarks.md).
# A request's statements are short; none gains from JIT, and any costly enough (a list, a count, an
# aggregate over a large namespace) would pay the same. Set per transaction, in the tenant's own
# round trip: it holds behind a pooler and after SET ROLE, where a role's setting does not. The
# embedded PostgreSQL has no JIT, so neither the tests nor the CPU benchmarks saw it.
TENANT_TX_SETTINGS = {"jit": "off"}


def set_local_sql(settings: Mapping[str, str]) -> str:
    """``SET LOCAL`` statements for ``settings``, one query. ``SET LOCAL`` rather than
    ``set_config(..., true)``: both are transaction-local, but on a Citus coordinator only a
    ``SET LOCAL`` reaches the workers (with ``citus.propagate_set_commands = 'local'``), and there
    row-level security would otherwise see no tenant and answer nothing (docs/scaling.md). A
    ``SET`` takes no bound parameter, so each value is checked against ``_SETTING_VALUE`` and
    quoted; a value outside it raises ``ValueError``."""
    parts = []
    for name, value in settings.items():
        if not _SETTING_NAME.match(name) or not _SETTING_VALUE.match(value):
            raise ValueError(f"refusing to set {name!r} to {value!r}: not a setting name and plain value")
        parts.append(f"SET LOCAL {name} = '{value}'")
    return "; ".join(parts)


async def set_local(session: AsyncSession, settings: Mapping[str, str]) -> None:
    """``settings`` for the rest of the session's transaction, in one round trip (see
    ``set_local_sql``). Sent on psycopg's own connection without parameters, as one simple query
    however many statements it holds: every request's transaction opens with it, and the ORM's path
    around a ``text()`` statement (parsing it, the compile cache, the result set-up) cost 0.4 ms of
    Python per search (docs/benchmarks.md). Never prepared: its text differs per tenant, and psycopg
    would otherwise prepare each tenant's after five uses and crowd the search statements out of its
    100 prepared statements per connection."""
    if not settings:
        return
    connection = await session.connection()
    driver = (await connection.get_raw_connection()).driver_connection
    assert driver is not None  # a checked-out connection has its psycopg connection
    await driver.execute(set_local_sql(settings), prepare=False)


class TenantTx:
    """An open transaction bound to one tenant, with work to run only once it has committed."""

    def __init__(self, session: AsyncSession, tenant_id: uuid.UUID) -> None:
        self.session = session
        self.tenant_id = tenant_id
        self._after_commit: list[AfterCommit] = []

    def after_commit(self, fn: AfterCommit) -> None:
        self._after_commit.append(fn)


# A pooled connection back in use within this many seconds of its last is not pinged first.
IDLE_BEFORE_PING_S = 1.0


def ping_when_idle(engine: AsyncEngine, idle_s: float = IDLE_BEFORE_PING_S) -> None:
    """Ping a pooled connection on checkout only when it has been idle ``idle_s`` or more.

    SQLAlchemy's ``pool_pre_ping`` pings on every checkout: a round trip for each of a request's two
    checkouts (the key lookup, the operation), about 0.25 ms of a get's 4.6 ms of CPU together
    (docs/benchmarks.md, "What every request does before its operation"). The pings catch
    connections that died while they sat in the pool (a restarted server, an idle timeout on the
    way); a connection in use a moment ago has had no time to. If the server restarts under load,
    the first request to meet a dead connection fails (503) and SQLAlchemy then replaces every
    connection pooled before it, as it does without a ping."""
    pool = engine.sync_engine.pool

    @event.listens_for(pool, "checkin")
    def _returned(dbapi_conn: Any, record: Any) -> None:
        if dbapi_conn is not None:
            # Cleared with the record's info when it reconnects: a new connection is not pinged.
            record.info["memvault_returned_at"] = time.monotonic()

    @event.listens_for(pool, "checkout")
    def _maybe_ping(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        returned = record.info.get("memvault_returned_at")
        if returned is None or time.monotonic() - returned < idle_s:
            return
        if not pool._dialect._do_ping_w_event(dbapi_conn):
            # As pool_pre_ping does: replace this one and every connection pooled before it.
            raise sa_exc.InvalidatePoolError()


class Database:
    def __init__(self, urls: DatabaseUrls, *, pool_size: int = 10, pooled: bool = True) -> None:
        self.urls = urls
        # Told how long each request transaction waited for its connection (the app's pool metric).
        self.on_pool_wait: Callable[[float], None] | None = None
        # Whether the database is a Citus coordinator: asked in the first tenant transaction.
        self.citus: bool | None = None
        cache_long_statements()
        # Unpooled for jobs: each runs in its own short-lived event loop, and a pooled asyncio
        # connection belongs to the loop that opened it.
        pool: dict[str, Any] = (
            {"pool_size": pool_size, "max_overflow": pool_size} if pooled else {"poolclass": NullPool}
        )
        # Requests' connections give up their operation's turn at the process's Python while they
        # wait on the server (plans/cputurns.py); outside a turn-taking operation they are psycopg's.
        self.app_engine: AsyncEngine = create_async_engine(
            urls.app, connect_args={"async_creator_fn": FairConnection.connect}, **pool
        )
        if pooled:
            ping_when_idle(self.app_engine)
        # A tenant's statements carry its size to the planner, so that a plan PostgreSQL keeps
        # serves only tenants it prices alike (db/planned.py).
        event.listen(self.app_engine.sync_engine, "before_cursor_execute", planned.marked, retval=True)
        self.planned_sizes = planned.PlannedSizes()
        if urls.set_role:
            role = urls.set_role

            @event.listens_for(self.app_engine.sync_engine, "connect")
            def _become_app_role(dbapi_conn: Any, _record: Any) -> None:
                with dbapi_conn.cursor() as cur:
                    cur.execute(f"SET ROLE {role}")
                dbapi_conn.commit()

        # The owner engine is for tenant administration (creating tenants) only, never requests:
        # pinged on every checkout (the app engine when idle, above), so that after the server
        # restarts a pooled connection to the old one is replaced instead of failing its caller.
        self.owner_engine: AsyncEngine = create_async_engine(
            urls.owner,
            **({"pool_size": 2, "max_overflow": 2, "pool_pre_ping": True} if pooled else {"poolclass": NullPool}),
        )
        self._sessions = async_sessionmaker(self.app_engine, expire_on_commit=False)
        self._owner_sessions = async_sessionmaker(self.owner_engine, expire_on_commit=False)

    @asynccontextmanager
    async def tenant_tx(
        self, tenant_id: uuid.UUID, *, snapshot: bool = False, settings: Mapping[str, str] | None = None
    ) -> AsyncIterator[TenantTx]:
        """A transaction in which row-level security admits only ``tenant_id``'s rows.

        ``SET LOCAL`` is transaction-local, so a pooled connection never carries the tenant into the
        next request (and on Citus it reaches the workers: ``set_local_sql``). ``settings``: more
        transaction-local settings, made in the same round trip. Callbacks registered with
        ``after_commit`` run only after a successful commit; an exception rolls back and drops them.
        """
        async with _reachable(), self._sessions() as session, session.begin():
            await self._check_out(session)
            if snapshot:
                # One consistent view across many statements (an export that pages through tables).
                await session.execute(text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"))
            await set_local(session, {"app.tenant_id": str(tenant_id), **TENANT_TX_SETTINGS, **(settings or {})})
            if self.citus is None:
                # Once per Database: the shape of the database it serves does not change under it.
                self.citus = await _is_citus(session)
            if self.citus:
                await _bind_on_client(session)
            # On Citus the coordinator plans each statement (client-side binding): nothing is kept.
            size = None if self.citus else await self.planned_sizes.order_of(session, tenant_id)
            tx = TenantTx(session, tenant_id)
            token, citus_token = _system_apart.set(self.citus), _on_citus.set(self.citus)
            planning = planned.planning_for(size)
            try:
                yield tx
            finally:
                planned.done_planning(planning)
                _system_apart.reset(token)
                _on_citus.reset(citus_token)
        for fn in tx._after_commit:
            try:
                result = fn()
                if hasattr(result, "__await__"):
                    await result
            except Exception:  # the data is committed; a failed follow-up must not turn it into an error
                log.exception("after-commit callback failed")

    @asynccontextmanager
    async def unscoped(self) -> AsyncIterator[AsyncSession]:
        """An app-role session with no tenant: RLS shows it nothing. For the key lookup function."""
        async with _reachable(), self._sessions() as session, session.begin():
            await self._check_out(session)
            yield session

    @asynccontextmanager
    async def lookup(self) -> AsyncIterator[AsyncSession]:
        """As ``unscoped``, for one read that needs no transaction around it (the API key's lookup,
        on every request with a key): in autocommit, the statement goes alone, without the BEGIN
        and COMMIT round trips."""
        async with _reachable(), self._sessions() as session:
            await self._check_out(session, isolation_level="AUTOCOMMIT")
            yield session

    async def _check_out(self, session: AsyncSession, **execution_options: Any) -> None:
        """Take the session's connection now, timing the wait for a free one: a pool too small for
        the load shows as requests waiting here (``memvault_db_pool_wait_seconds``)."""
        started = time.perf_counter()
        await session.connection(execution_options=execution_options or None)
        if self.on_pool_wait is not None:
            self.on_pool_wait(time.perf_counter() - started)

    @asynccontextmanager
    async def owner(self) -> AsyncIterator[AsyncSession]:
        """An owner session (bypasses RLS). Tenant creation and operator tooling only."""
        async with _reachable(), self._owner_sessions() as session, session.begin():
            yield session

    async def ping(self, timeout_s: float = 3.0) -> bool:
        """Whether the database answers within ``timeout_s``: a health check must answer before
        its prober gives up, also when the database hangs rather than refuses."""
        try:
            async with asyncio.timeout(timeout_s), self.app_engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
            return True
        except Exception:
            log.warning("database ping failed", exc_info=True)
            return False

    async def dispose(self) -> None:
        await self.app_engine.dispose()
        await self.owner_engine.dispose()
