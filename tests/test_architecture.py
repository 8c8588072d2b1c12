"""Where SQL may live, checked on the syntax tree of every module of the server package.

SQL (statement text, ``text()``, SQLAlchemy's statement builders, a session's or connection's
``execute``) belongs in a capability's ``repository.py`` (or the ``<topic>_repository.py`` modules
a large one is split into, as ``memories/reads_repository.py``), in ``db/`` (engines, the tenant
transaction, migrations) and in the retrieval statement modules (``retrieval/sql/``). A
``models.py`` may use ``text()`` for a column's ``server_default`` only: that is DDL the migrations
already own, not a query. Doors (routers, MCP tools, ``mcp/``, ``gateway/``) never import a
repository: they call the facade.

The detector is tested on planted sources too, so a change that blinds it fails here instead of
passing everything.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "services" / "memvault"

# Files that still hold SQL outside the places above, each because another change owns it. The
# list only shrinks: test_known_exceptions_still_needed fails when an entry has become clean (or
# gone), so whoever fixes a file also deletes its line here.
KNOWN_EXCEPTIONS: dict[str, str] = {}

# ---- the detector -----------------------------------------------------------------------------

# A statement's opening words. Upper case, as every statement in this code base is written, and
# followed by what makes it a statement, so prose ("Select the ids ...") never matches.
_STATEMENT = re.compile(
    r"""^\s*\(?\s*(?:
        SELECT(?:\s+\S|\s+$)
      | INSERT\s+INTO\s
      | UPDATE\s+\w+(?:\s+\w+)?\s+SET\s
      | DELETE\s+FROM\s
      | WITH\s+(?:RECURSIVE\s+)?\w+(?:\s*\([^)]*\))?\s+AS\s*(?:(?:NOT\s+)?MATERIALIZED\s*)?\(
      | (?:CREATE|ALTER|DROP)\s+(?:OR\s+REPLACE\s+|UNIQUE\s+|TEMP(?:ORARY)?\s+)*
            (?:TABLE|INDEX|VIEW|FUNCTION|POLICY|ROLE|EXTENSION|TRIGGER|SCHEMA|TYPE|SEQUENCE|MATERIALIZED)\s
      | SET\s+(?:LOCAL\s+|SESSION\s+)?(?:ROLE|TRANSACTION|[a-z_]+\.[a-z_]+|search_path|statement_timeout)\b
      | (?:VACUUM|ANALYZE|TRUNCATE|REINDEX|CLUSTER)\b
      | (?:LOCK\s+TABLE|COPY\s+\w+|GRANT\s+\w+|REVOKE\s+\w+|NOTIFY\s+\w+|LISTEN\s+\w+)
      | (?:BEGIN|COMMIT|ROLLBACK|SAVEPOINT)\s*;?\s*$
    )""",
    re.VERBOSE,
)

# Methods of a SQLAlchemy session or connection (and of a DB-API cursor) that send a statement,
# called with the statement as an argument (a result's ``scalar()`` takes none).
_SENDS = frozenset({"execute", "executemany", "exec_driver_sql", "scalar", "scalars"})
# The ORM's unit of work, and ``stream`` (httpx has one too): SQL only when the receiver is named
# like a session or connection (``s``, ``session``, ``tx.session``, ``conn``).
_SESSION_CALLS = frozenset({"stream", "stream_scalars", "add", "add_all", "flush", "delete", "merge", "refresh"})
_SESSION_NAMES = frozenset({"s", "session", "conn", "connection", "cursor", "cur"})

# SQLAlchemy's statement builders: building a statement is writing SQL.
_BUILDERS = frozenset(
    {"text", "select", "insert", "update", "delete", "union", "union_all", "values", "literal_column", "table"}
)
_SQLALCHEMY = ("sqlalchemy",)

# Keywords under which a models.py may give text(): DDL that mirrors the migrations.
_DDL_KEYWORDS = frozenset({"server_default", "server_onupdate"})


@dataclass(frozen=True)
class Finding:
    line: int
    what: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.what}"


def is_statement(s: str) -> bool:
    """Whether a string literal is (the start of) a SQL statement."""
    return bool(_STATEMENT.match(s))


def _literal_text(node: ast.AST) -> str | None:
    """A string literal's text; an f-string's with each placeholder as ``x``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(str(v.value) if isinstance(v, ast.Constant) else "x" for v in node.values)
    return None


def _sqlalchemy_names(tree: ast.Module) -> tuple[dict[str, str], set[str]]:
    """Names bound to SQLAlchemy's builders (local name -> builder) and to its modules."""
    builders: dict[str, str] = {}
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in _SQLALCHEMY:
            for alias in node.names:
                if alias.name in _BUILDERS:
                    builders[alias.asname or alias.name] = alias.name
                elif alias.name[:1].islower():  # a submodule (``from sqlalchemy import sql``)
                    modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in _SQLALCHEMY:
                    modules.add(alias.asname or alias.name.split(".")[0])
    return builders, modules


def _root(node: ast.AST) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _session_like(node: ast.AST) -> bool:
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
    return name in _SESSION_NAMES


def _mapped_class(args: list[ast.expr]) -> bool:
    """A CamelCase name (a model class), not a CONSTANT."""
    return bool(args) and isinstance(args[0], ast.Name) and args[0].id[:1].isupper() and not args[0].id.isupper()


def _docstrings(tree: ast.Module) -> set[int]:
    """Ids of the string nodes that are docstrings or bare expression strings: prose, never run."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant | ast.JoinedStr)
    }


def sql_findings(source: str, *, models: bool = False) -> list[Finding]:
    """Every place in ``source`` that writes or sends SQL. ``models``: the file is a models.py,
    where ``text()`` as a ``server_default`` is allowed."""
    tree = ast.parse(source)
    builders, modules = _sqlalchemy_names(tree)
    prose = _docstrings(tree)
    allowed: set[int] = set()
    if models:
        for node in ast.walk(tree):
            if isinstance(node, ast.keyword) and node.arg in _DDL_KEYWORDS:
                allowed.add(id(node.value))
    findings: list[Finding] = []
    inside_fstring: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            inside_fstring.update(id(v) for v in node.values)
    skip = prose | inside_fstring
    for node in ast.walk(tree):
        literal = _literal_text(node)
        if isinstance(node, ast.expr) and literal is not None and id(node) not in skip:
            if is_statement(literal):
                findings.append(Finding(node.lineno, f"SQL text {literal.strip()[:40]!r}"))
            continue
        if not isinstance(node, ast.Call) or id(node) in allowed:
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in builders:
            findings.append(Finding(node.lineno, f"SQLAlchemy {builders[func.id]}()"))
        elif isinstance(func, ast.Attribute) and func.attr in _BUILDERS and _root(func) in modules:
            findings.append(Finding(node.lineno, f"SQLAlchemy {ast.unparse(func)}()"))
        elif isinstance(func, ast.Attribute) and func.attr in _SENDS and (node.args or node.keywords):
            findings.append(Finding(node.lineno, f"statement sent with .{func.attr}()"))
        elif isinstance(func, ast.Attribute) and func.attr in _SESSION_CALLS and _session_like(func.value):
            findings.append(Finding(node.lineno, f"session used: {ast.unparse(func)}()"))
        elif isinstance(func, ast.Attribute) and func.attr == "get" and _mapped_class(node.args[:1]):
            # ``session.get(Model, id)``; a dict's ``get`` takes a key, not a class.
            findings.append(Finding(node.lineno, f"session used: {ast.unparse(func)}()"))
    return sorted(findings, key=lambda f: f.line)


def repository_imports(source: str, module: str) -> list[Finding]:
    """Imports of a repository module in ``source``, whose own dotted name is ``module``."""
    findings: list[Finding] = []
    package = module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        for name in names:
            if _REPOSITORY.fullmatch(name.rsplit(".", 1)[-1]):
                findings.append(Finding(node.lineno, f"imports {name}"))
                break
    return findings


# ---- the rules --------------------------------------------------------------------------------


def _modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE).as_posix(), path


# A repository module's name: ``repository``, or ``<topic>_repository`` when one is split up.
_REPOSITORY = re.compile(r"(?:\w+_)?repository")


def sql_home(rel: str) -> bool:
    """Whether SQL may live in this module (``rel`` relative to the package)."""
    package, _, name = rel.rpartition("/")
    in_repository = bool(package) and _REPOSITORY.fullmatch(name.removesuffix(".py")) is not None
    return in_repository or rel.startswith(("db/", "retrieval/sql/"))


def is_door(rel: str) -> bool:
    name = rel.rsplit("/", 1)[-1]
    return name in ("router.py", "tools.py") or rel.startswith(("mcp/", "gateway/"))


def _sql_outside_homes() -> dict[str, list[Finding]]:
    found: dict[str, list[Finding]] = {}
    for rel, path in _modules():
        if sql_home(rel):
            continue
        hits = sql_findings(path.read_text(), models=rel.endswith("/models.py") or rel == "models.py")
        if hits:
            found[rel] = hits
    return found


def _report(found: dict[str, list[Finding]]) -> str:
    return "\n".join(f"{rel}: {', '.join(map(str, hits))}" for rel, hits in sorted(found.items()))


def test_sql_only_in_repositories() -> None:
    found = {rel: hits for rel, hits in _sql_outside_homes().items() if rel not in KNOWN_EXCEPTIONS}
    assert not found, (
        "SQL outside a repository.py (or a *_repository.py), db/ or retrieval/sql/ (move it into the "
        "capability's repository):\n" + _report(found)
    )


def test_doors_do_not_import_repositories() -> None:
    found: dict[str, list[Finding]] = {}
    for rel, path in _modules():
        if is_door(rel):
            module = "memvault." + rel.removesuffix(".py").replace("/", ".")
            hits = repository_imports(path.read_text(), module)
            if hits:
                found[rel] = hits
    assert not found, "a door imports a repository (call the facade instead):\n" + _report(found)


def test_memory_history_is_written_with_its_webhook_event() -> None:
    """Whoever changes a memory goes through memories/changes.py, which queues the change's
    webhook event beside its history entry: a new path (a job, a resolution) cannot forget it."""
    found = [
        rel
        for rel, path in _modules()
        if rel != "memories/changes.py"
        and re.search(r"\brecord_history\(", path.read_text())
        and rel != "memories/repository.py"
    ]
    assert not found, f"memory history written outside memories/changes.py (call changes.record): {found}"


MAX_LINES = 600  # ../shared/STYLE.md: modules under ~600 lines


def test_modules_stay_under_the_style_s_length() -> None:
    """A module past it reads as several things: split it by what its parts do (as cli.py/admin.py,
    guard/, oauth/{issuer,signin,tokens}.py, memories/reads_repository.py did), not by cutting."""
    long = {rel: n for rel, path in _modules() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_known_exceptions_still_needed() -> None:
    dirty = _sql_outside_homes()
    stale = [rel for rel in KNOWN_EXCEPTIONS if rel not in dirty]
    assert not stale, f"no SQL left in {stale}: delete their lines from KNOWN_EXCEPTIONS"


# ---- the detector catches what it is meant to --------------------------------------------------

PLANTED = '''
"""SELECT * FROM docstrings is prose, not a statement."""
import sqlalchemy as sa
from sqlalchemy import select as pick, text
from memvault.memories.models import Memory

QUERY = "SELECT id FROM memories WHERE tenant_id = :t"


async def probe(s, tx, http, seen, table):
    """Delete from the table every row: prose again."""
    s.execute(sa.text("SELECT 1"))
    stmt = text(f"DELETE FROM {table} WHERE id = :id")
    rows = s.scalars(pick(Memory))
    s.exec_driver_sql(f"UPDATE {table} SET state = 'archived'")
    s.add(Memory(content="x"))
    await tx.session.flush()
    seen.add(table)
    s.get(Memory, 1), seen.get("Memory"), seen.get(HEADER)
    return rows.scalar(), stmt, http.stream("GET", "/")
'''


def test_detector_finds_planted_sql() -> None:
    found = [(f.line, f.what.split(" ")[0] + " " + f.what.split(" ")[1]) for f in sql_findings(PLANTED)]
    assert found == [
        (7, "SQL text"),
        (12, "statement sent"),
        (12, "SQLAlchemy sa.text()"),
        (12, "SQL text"),
        (13, "SQLAlchemy text()"),
        (13, "SQL text"),
        (14, "statement sent"),
        (14, "SQLAlchemy select()"),
        (15, "statement sent"),
        (15, "SQL text"),
        (16, "session used:"),
        (17, "session used:"),
        (19, "session used:"),
    ]


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT count(*) FROM entities",
        "SELECT ",
        "  INSERT INTO events (id) VALUES (:id)",
        "UPDATE memories SET state = 'archived'",
        "UPDATE memories m SET state = 'archived'",
        "DELETE FROM relations WHERE tenant_id = :t",
        "WITH a AS (UPDATE memories SET x = 1 RETURNING 1) SELECT count(*) FROM a",
        "WITH RECURSIVE chain(id) AS (SELECT 1)",
        "VACUUM (INDEX_CLEANUP ON) memories",
        "SET LOCAL app.tenant_id = '1'",
        "SET ROLE memvault_app",
        "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ",
        "CREATE UNIQUE INDEX ix ON t (a)",
        "DROP TABLE t",
        "ALTER TABLE t ADD COLUMN c int",
    ],
)
def test_detector_knows_a_statement(sql: str) -> None:
    assert is_statement(sql)


@pytest.mark.parametrize(
    "prose",
    [
        "Select the ids of the memories concerned.",
        "select",
        "SELECT",
        "Update the memory",
        "settings",
        "WITH the tenant's key",
        "tenant_id = :t AND namespace_id = :n",
        "'{}'::jsonb",
        "gen_random_uuid()",
    ],
)
def test_detector_leaves_prose_alone(prose: str) -> None:
    assert not is_statement(prose)


def test_models_may_give_ddl_defaults_only() -> None:
    source = (
        "from sqlalchemy import text\n"
        "id = mapped_column(server_default=text('gen_random_uuid()'))\n"
        "bad = text('now()')\n"
    )
    assert [f.line for f in sql_findings(source, models=True)] == [3]
    assert [f.line for f in sql_findings(source)] == [2, 3]


def test_detector_finds_a_door_importing_a_repository() -> None:
    source = (
        "from memvault.memories import repository\n"
        "from memvault.entities.repository import get\n"
        "from . import repository as repo\n"
        "from ..traces import repository\n"
        "import memvault.jobs.repository\n"
        "from memvault.entities import relations_repository as relations\n"
        "from memvault.memories.reads_repository import read_conditions\n"
        "from memvault.memories import schemas, service, repositoryish\n"
    )
    assert [f.line for f in repository_imports(source, "memvault.memories.router")] == [1, 2, 3, 4, 5, 6, 7]


@pytest.mark.parametrize(
    ("rel", "home"),
    [
        ("memories/repository.py", True),
        ("memories/reads_repository.py", True),
        ("webhooks/delivery/repository.py", True),
        ("db/session.py", True),
        ("retrieval/sql/words.py", True),
        ("repository.py", False),
        ("memories/service.py", False),
        ("memories/repository_helpers.py", False),
        ("memories/nonrepository.py", False),
    ],
)
def test_sql_homes(rel: str, home: bool) -> None:
    assert sql_home(rel) is home


# ---- waits that keep a cancel ------------------------------------------------------------------


def wait_for_calls(source: str) -> list[Finding]:
    """Uses of ``asyncio.wait_for``. On Python 3.11 (the floor) it returns the awaited result and
    drops a cancel that arrives in the loop turn the result came in (CPython gh-86296): a loop
    that waits with it for a wake-up or a stop may never stop. ``asyncio.timeout`` keeps the
    cancel; the webhook sender's shutdown hung on exactly this (tests/webhooks/delivery)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module == "asyncio":
            found += [Finding(node.lineno, "from asyncio import wait_for") for a in node.names if a.name == "wait_for"]
        elif (
            isinstance(node, ast.Attribute)
            and node.attr == "wait_for"
            and isinstance(node.value, ast.Name)
            and node.value.id == "asyncio"
        ):
            found.append(Finding(node.lineno, "asyncio.wait_for"))
    return sorted(found, key=lambda f: f.line)


SDK = PACKAGE.parents[1] / "sdk" / "memvault_sdk"


def test_no_wait_that_drops_a_cancel() -> None:
    """In the server package and the SDK (whose floor is Python 3.10, where it is the same)."""
    sources = [*_modules(), *((f"sdk/{p.relative_to(SDK).as_posix()}", p) for p in sorted(SDK.rglob("*.py")))]
    assert len(sources) > len(list(_modules()))  # the SDK's modules were found
    found = {rel: hits for rel, path in sources if (hits := wait_for_calls(path.read_text()))}
    assert not found, "asyncio.wait_for drops a cancel on Python 3.11 (use asyncio.timeout):\n" + _report(found)


def test_detector_finds_wait_for() -> None:
    source = (
        "import asyncio\n"
        "from asyncio import wait_for, sleep\n"
        "async def f(ev):\n"
        "    await asyncio.wait_for(ev.wait(), 1)\n"
        "    async with asyncio.timeout(1):\n"
        "        await ev.wait()\n"
        "    waiter = asyncio.wait_for\n"
    )
    assert [f.line for f in wait_for_calls(source)] == [2, 4, 7]
