"""Settings, read once from the environment (prefix ``MEMVAULT_``) and passed to constructors."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from memvault.db.embedded import SIZE_PATTERN
from memvault.ratelimit import check_spec


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MEMVAULT_", env_file=".env", extra="ignore")

    # Storage. Without database_url, `memvault serve` runs an embedded PostgreSQL in data_dir.
    database_url: str | None = Field(
        default=None,
        description="Owner/migration connection (postgresql://...). Unset: embedded PostgreSQL in data_dir.",
    )
    app_database_url: str | None = Field(
        default=None,
        description="Connection for the request path, as the non-owner app role. "
        "Unset: database_url with SET ROLE to app_role.",
    )
    app_role: str = Field(default="memvault_app", description="PostgreSQL role that request-path queries run as.")
    data_dir: Path = Field(default=Path("memvault-data"), description="Folder of the embedded PostgreSQL.")
    embedded_shared_buffers: str = Field(
        default="auto",
        pattern=rf"^(auto|{SIZE_PATTERN})$",
        description="The embedded PostgreSQL's shared_buffers: `auto` (a quarter of the machine's memory, "
        "128MB to 8GB) or a size such as 2GB. Applies at the server's next start.",
    )
    db_pool_size: int = Field(default=10, ge=1, description="Connections kept per gateway process.")
    embedded_supervise_interval_s: float = Field(
        default=1.0,
        ge=0,
        description="How often `memvault serve` checks that its embedded PostgreSQL runs, and restarts it "
        "if not. 0: not supervised.",
    )
    embedded_restart_attempts: int = Field(
        default=10,
        ge=1,
        description="Failed restarts of the embedded PostgreSQL in a row (backing off up to 30 s) before "
        "`/healthz` fails so that the process itself is restarted.",
    )

    redis_url: str | None = Field(default=None, description="Redis for jobs. Unset: jobs run in-process.")

    # Background jobs (docs/workers.md).
    job_threads: int = Field(default=2, ge=1, description="Threads running jobs in-process when redis_url is unset.")
    job_max_attempts: int = Field(default=3, ge=1, description="Tries per job before it is marked failed.")
    job_retry_backoff_s: float = Field(
        default=10.0, ge=0, description="Wait before the first retry; each later retry waits four times longer."
    )
    job_timeout_s: int = Field(default=1800, ge=1, description="A job running longer is stopped (RQ workers).")
    job_recover_on_start: bool = Field(
        default=True, description="Re-dispatch jobs a stopped server or worker left queued or running."
    )
    job_sweep_interval_s: float = Field(
        default=15.0,
        ge=0,
        description="How often `memvault worker` (with Redis) or `memvault serve` (without) looks for jobs "
        "that PostgreSQL has as queued or abandoned but no queue holds, and dispatches them again. 0: never.",
    )
    job_cancel_poll_s: float = Field(
        default=1.0, gt=0, description="How often a running job checks whether it was cancelled."
    )
    scheduler_interval_s: int = Field(
        default=60,
        ge=0,
        description="Seconds between two checks for namespaces whose periodic maintenance is due "
        "(`memvault scheduler` with Redis, else inside `memvault serve`). 0: no periodic maintenance.",
    )
    # Webhooks (docs/webhooks.md): the sender of the outbox.
    webhook_allow_private: bool = Field(
        default=False,
        description="Let webhooks reach loopback, private, link-local and other internal addresses, and "
        "plain http: for local development and tests only.",
    )
    webhook_timeout_s: float = Field(
        default=10.0, gt=0, le=60, description="One webhook attempt, connect to last byte read; slower fails."
    )
    webhook_tenant_concurrency: int = Field(
        default=2, ge=1, description="Webhook attempts one tenant may have in flight per sender process."
    )
    webhook_concurrency: int = Field(
        default=64, ge=1, description="Webhook attempts in flight per sender process, over all tenants."
    )
    webhook_sweep_interval_s: float = Field(
        default=1.0,
        ge=0,
        description="How often the webhook sender (`memvault worker` with Redis, `memvault serve` without) "
        "looks for due deliveries; also woken at once by each commit that queues some. 0: no sender here.",
    )
    extractor: Literal["rules", "llm"] = Field(
        default="rules", description="Memory extraction from events: local rules, or an OpenAI-compatible LLM."
    )
    llm_base_url: str = Field(default="https://api.openai.com/v1", description="OpenAI-compatible chat API.")
    llm_model: str = Field(default="gpt-4o-mini", description="Chat model the LLM extractor asks.")
    llm_api_key: SecretStr | None = Field(default=None)
    llm_timeout_s: float = Field(default=30.0, gt=0, description="One extraction request; slower falls back to rules.")
    # Maintenance jobs (docs/workers.md, "Maintenance").
    dedup_threshold: float = Field(
        default=0.92, gt=0, le=1, description="Cosine at or above which two memories are near-duplicates."
    )
    decay_half_life_days: float = Field(
        default=30.0, gt=0, description="Days for an unused memory's strength to halve."
    )
    decay_archive_below: float = Field(
        default=0.05, ge=0, le=1, description="Decay archives current memories whose strength is below this."
    )
    promote_min_mentions: int = Field(default=2, ge=1, description="Mentions that promote a tentative memory.")
    promote_min_accesses: int = Field(default=3, ge=1, description="Recalls that promote a tentative memory.")
    # Search (docs/api.md, "Search").
    search_lexical: Literal["bm25", "ts_rank_cd"] = Field(
        default="bm25",
        description="Lexical ranking: BM25 over per-namespace word frequencies, or PostgreSQL's ts_rank_cd.",
    )
    search_recency_half_life_days: float = Field(
        default=30.0, gt=0, description="Age at which a memory's recency signal in search halves."
    )
    # Issue 30 (clients that send only text): events stored without a session id are each other's
    # conversational neighbours when they have the same owner (scope, user, agent) and follow one
    # another within this gap (retrieval/sql/inferred.py). 0 turns it off.
    search_session_gap_minutes: float = Field(
        default=30.0,
        ge=0,
        le=7 * 1440,
        description="Session-less events of one owner this close in time count as one conversation "
        "for the context channel and `neighbours`; 0: only session ids do. A namespace's search settings override it.",
    )
    access_write_interval_s: float = Field(
        default=1.0,
        gt=0,
        le=60,
        description="Seconds between two writes of the access counts searches make (one write per tenant).",
    )
    # Second stage of search (docs/api.md, "Second stage"): best effort, off by default.
    rerank_provider: Literal["none", "cross-encoder", "http"] = Field(
        default="none",
        description="Reranker of the top fused hits: a local sentence-transformers cross-encoder, "
        "or a Cohere/Jina-style POST /rerank server.",
    )
    rerank_model: str = Field(
        default="cross-encoder/ms-marco-MiniLM-L6-v2",
        description="Cross-encoder model name or local path, or the rerank server's model id.",
    )
    rerank_base_url: str | None = Field(default=None, description="Rerank API base (http provider); required there.")
    rerank_api_key: SecretStr | None = Field(default=None, description="Bearer key for the rerank API.")
    rerank_timeout_s: float = Field(
        default=5.0, gt=0, description="One rerank call; slower serves the first-stage order."
    )
    rerank_candidates: int = Field(
        default=30, ge=1, le=500, description="How many of the top fused hits the reranker scores."
    )
    rewrite_provider: Literal["none", "hyde"] = Field(
        default="none",
        description="Query rewrite: `hyde` asks an OpenAI-compatible chat model for a hypothetical "
        "answer that the dense channel searches with too.",
    )
    rewrite_base_url: str = Field(default="https://api.openai.com/v1", description="OpenAI-compatible chat API.")
    rewrite_model: str = Field(default="gpt-4o-mini", description="Chat model that writes the hypothetical answer.")
    rewrite_api_key: SecretStr | None = Field(default=None, description="Bearer key for the rewrite API.")
    rewrite_timeout_s: float = Field(
        default=5.0, gt=0, description="One rewrite call; slower searches with the query alone."
    )

    # Embeddings.
    embedding_provider: Literal["local", "openai"] = Field(default="local")
    embedding_model: str = Field(
        default="sentence-transformers/all-MiniLM-L6-v2",
        description="sentence-transformers model name or path (local) or model id (openai).",
    )
    embedding_dim: int = Field(default=384, description="Vector width; the schema stores vector(384).")
    embedding_batch_size: int = Field(default=64, ge=1)
    embedding_runtime: Literal["onnx", "torch"] = Field(
        default="onnx",
        description="local: run single texts (search queries) with ONNX Runtime, exported from the model on "
        "first load (3-4x faster for one query); `torch` keeps everything on sentence-transformers.",
    )
    embedding_quantize: Literal["none", "int8"] = Field(
        default="none",
        description="local, onnx: `int8` runs the model with int8 weights (about half the CPU per text; vectors "
        "change, cosine about 0.99, so they are stored under the model id `<model>+int8`: memories embedded "
        "with the other setting leave the dense channel until embedded again).",
    )
    embedding_slice_tokens: int = Field(
        default=256,
        ge=1,
        description="local: the model runs one slice of a batch at a time, at most this many tokens (rows times "
        "padded width), and tenants take turns slice by slice: another tenant waits at most one slice.",
    )
    embedding_onnx_dir: Path | None = Field(
        default=None, description="local: where the exported ONNX model is kept. Unset: ~/.cache/memvault/onnx."
    )
    embedding_base_url: str = Field(default="https://api.openai.com/v1", description="OpenAI-compatible API.")
    embedding_api_key: SecretStr | None = Field(default=None)
    embedding_timeout_s: float = Field(default=30.0, gt=0)
    query_cache_size: int = Field(default=2048, ge=0, description="Query embeddings kept in an LRU cache.")

    # HTTP.
    host: str = Field(default="127.0.0.1")
    port: int = Field(default=8080)
    public_url: str | None = Field(default=None, description="Base URL clients use. Unset: http://host:port.")
    max_body_bytes: int = Field(default=5 * 1024 * 1024, description="Larger request bodies get 413.")
    max_import_bytes: int = Field(
        default=256 * 1024 * 1024, description="Limit for one namespace import (`POST .../import`) body."
    )
    body_read_timeout_s: float = Field(
        default=30.0,
        gt=0,
        description="A request body must arrive within this many seconds of its headers (plus 1 s per "
        "`body_min_rate` bytes received), or 408 request_timeout and the connection closes.",
    )
    body_min_rate: int = Field(
        default=8192, ge=1, description="Bytes per second a body upload must average to earn time past the timeout."
    )
    security_contact: str = Field(
        default="security@memvault.example",
        description="Where vulnerabilities are reported (docs/security.md); the OpenAPI's contact. "
        "A placeholder: operators set their own address.",
    )
    log_level: str = Field(default="INFO")
    # Serving and observability (docs/operations.md, "Workers, overload, metrics and logs").
    workers: int | None = Field(
        default=None, ge=1, description="`memvault serve` processes sharing the port. Unset: one per CPU core."
    )
    max_in_flight: int = Field(
        default=32,
        ge=1,
        description="Requests each process serves at once; more get 503 `overloaded` with Retry-After at once, "
        "and /readyz answers 503 while the process is full.",
    )
    shutdown_timeout_s: int = Field(
        default=30, ge=1, description="On SIGTERM, how long in-flight requests may take to finish before they are cut."
    )
    metrics_token: SecretStr | None = Field(
        default=None,
        description="Bearer token a /metrics scrape must send. Unset: /metrics answers loopback clients only.",
    )
    log_format: Literal["auto", "text", "json"] = Field(
        default="auto",
        description="`memvault serve` logs: JSON lines, text, or `auto` (text in a terminal, else JSON).",
    )

    # MCP.
    mcp_profile: Literal["core", "extended"] = Field(
        default="core",
        description="MCP tools served at /mcp and by `memvault mcp`: `core` (the five essential ones) or "
        "`extended` (all). A client picks either per connection: /mcp/core, /mcp/extended or ?profile=.",
    )
    mcp_allowed_hosts: list[str] = Field(
        default_factory=list, description="Host headers /mcp accepts besides the public URL's and loopback."
    )
    mcp_allowed_origins: list[str] = Field(
        default_factory=list, description="Browser Origins /mcp accepts besides the public URL's and loopback."
    )

    # OAuth 2.1 for remote MCP clients (docs/auth.md).
    oauth_issuer: str | None = Field(
        default=None, description="Authorization server issuer identifier. Unset: the public URL."
    )
    oauth_access_token_ttl_s: int = Field(default=900, ge=30, description="Lifetime of an access token (a JWT).")
    oauth_refresh_token_ttl_s: int = Field(
        default=30 * 86400, ge=60, description="A refresh token unused this long expires; each use rotates it."
    )
    oauth_code_ttl_s: int = Field(default=120, ge=10, description="Lifetime of an authorization code.")
    oauth_login_ttl_s: int = Field(default=600, ge=30, description="Time from signing in to answering consent.")
    oauth_key_rotation_s: int = Field(
        default=30 * 86400, ge=3600, description="Age at which a new token-signing key takes over."
    )
    oauth_cimd_allow_insecure: bool = Field(
        default=False,
        description="Fetch client metadata documents over http:// and from private addresses (local testing only).",
    )
    oauth_extra_redirect_schemes: list[str] = Field(
        default_factory=lambda: ["cursor"],
        description="App redirect schemes allowed although not reverse-domain (RFC 8252 §7.1). Cursor signs in "
        "at cursor://anysphere.cursor-mcp/...; PKCE keeps a code sent to an impostor claiming the scheme useless.",
    )

    # Rate limits (memvault.ratelimit): the limits library's notation, tiers separated by ';'. Counted
    # in Redis when redis_url is set (shared by replicas), in memory otherwise.
    signin_limit_per_address: str = Field(
        default="30/minute;300/hour", description="Sign-in attempts from one address (IPv6: one /64), any account."
    )
    signin_limit_per_account: str = Field(
        default="5/minute;20/hour;100/day",
        description="Sign-in attempts for one email from one address. Keyed by both, so a stranger elsewhere cannot "
        "lock the owner out; the later tiers are the backoff.",
    )
    oauth_register_limit: str = Field(default="20/minute;200/hour", description="Client registrations per address.")
    oauth_token_limit: str = Field(default="60/minute;1000/hour", description="Token requests per address.")
    bad_credentials_limit_per_address: str = Field(
        default="10/minute;100/hour",
        description="Requests with an invalid API key or access token from one address (IPv6: one /64) before the "
        "answer is 429 instead of 401; the later tiers are the backoff. Valid credentials are never refused.",
    )
    concurrency_lease_s: float = Field(
        default=120.0,
        gt=0,
        description="How long a running request holds one of its tenant's concurrent-request slots in Redis at "
        "most: a replica that dies mid-request frees its slots after this.",
    )
    fair_share_slots: int = Field(
        default=0,
        ge=0,
        description="Operations each process runs at once; more wait in their tenant's line, and a freed place goes "
        "to the waiting tenant running the fewest. 0: off (every operation runs at once); the cores and one "
        "is a start.",
    )
    fair_turns: bool = Field(
        default=False,
        description="Between their waits on the database, run the operation of the tenant with the fewest "
        "operations in flight first (plans/cputurns.py), so a tenant at its concurrency cap does not queue "
        "ahead of another tenant's search at every step.",
    )
    fair_share_wait_s: float = Field(
        default=10.0,
        gt=0,
        description="The longest an operation waits for its place; longer gets 503 `overloaded` with Retry-After.",
    )

    web_session_idle_s: int = Field(
        default=12 * 3600,
        gt=0,
        description="A dashboard sign-in ends after this long unused (its cookie then says sign in).",
    )
    web_session_max_s: int = Field(
        default=7 * 24 * 3600,
        gt=0,
        description="A dashboard sign-in ends this long after it began, however much it is used.",
    )

    signup_limit: str = Field(
        default="5/minute;20/hour;50/day", description="Sign-ups (`POST /v1/signup`, the /signup page) per address."
    )
    invitation_accept_limit: str = Field(
        default="10/minute;100/hour", description="Invitation acceptances (`POST /v1/invitations/accept`) per address."
    )

    @field_validator(
        "signin_limit_per_address",
        "signin_limit_per_account",
        "oauth_register_limit",
        "oauth_token_limit",
        "signup_limit",
        "invitation_accept_limit",
        "bad_credentials_limit_per_address",
    )
    @classmethod
    def _rate_limit(cls, v: str) -> str:
        return check_spec(v)

    # Self-serve accounts (docs/accounts.md): sign-up, email verification, invitations, mail.
    signup: Literal["open", "closed"] = Field(
        default="open",
        description="`open`: anyone may create an organisation at `POST /v1/signup` and /signup. `closed`: "
        "403 `signup_closed`; tenants are made by the operator (`memvault admin create-tenant`).",
    )
    signup_plan: str = Field(default="free", description="The plan a self-serve organisation starts on.")
    signup_verify_ttl_s: int = Field(
        default=48 * 3600, ge=300, description="How long the emailed verification link of a sign-up works."
    )
    signup_unverified_days: int = Field(
        default=7,
        ge=0,
        description="Organisations signed up this many days ago whose owner never verified the address "
        "(no verified user, no API key ever) are deleted by the scheduler's tick, so their names are free "
        "again. 0: kept for ever.",
    )
    invitation_ttl_s: int = Field(
        default=7 * 86400, ge=300, description="How long an invitation link works; after, invite again."
    )
    mailer: Literal["log", "smtp"] = Field(
        default="log",
        description="How mail (verification links, invitations) is sent: `log` writes it to the server log "
        "(a local install needs no mail server); `smtp` sends it through smtp_host.",
    )
    mail_from: str = Field(default="memvault <no-reply@localhost>", description="The From of every mail sent.")
    smtp_host: str | None = Field(default=None, description="SMTP server (mailer=smtp); required there.")
    smtp_port: int = Field(default=587, ge=1, le=65535, description="SMTP port.")
    smtp_user: str | None = Field(default=None, description="SMTP user name. Unset: no authentication.")
    smtp_password: SecretStr | None = Field(default=None, description="SMTP password.")
    smtp_starttls: bool = Field(
        default=True, description="Upgrade the SMTP connection with STARTTLS before authenticating and sending."
    )
    smtp_tls: bool = Field(
        default=False,
        description="TLS from the connection's first byte (SMTPS, implicit TLS, usually port 465) instead of "
        "STARTTLS; the server's certificate is verified either way.",
    )
    smtp_timeout_s: float = Field(default=10.0, gt=0, description="One SMTP conversation; slower fails (503).")

    @model_validator(mode="after")
    def _mail(self) -> Settings:
        # Refused at start: otherwise the first sign-up would find out, as a 500.
        if self.mailer == "smtp" and not self.smtp_host:
            raise ValueError("MEMVAULT_MAILER=smtp needs MEMVAULT_SMTP_HOST")
        return self

    # First start of an empty database.
    bootstrap_tenant: str = Field(default="default", description="Tenant created on first start.")
    # The accounts' own email rule (members/schemas.py EMAIL); a default that passes it and that
    # no real mailbox answers: nothing is mailed to the bootstrap owner.
    bootstrap_email: str = Field(
        default="owner@memvault.local",
        min_length=3,
        max_length=254,
        pattern=r"^[^@\s]+@[^@\s]+$",
        description="Email of the owner created with the first tenant; it signs in to the dashboard.",
    )

    def resolved_issuer(self) -> str:
        return (self.oauth_issuer or self.resolved_public_url()).rstrip("/")

    def mcp_resource_url(self) -> str:
        """The MCP endpoint as an OAuth protected resource (RFC 8707): the audience of access tokens."""
        return f"{self.resolved_public_url()}/mcp"

    def resolved_public_url(self) -> str:
        if self.public_url:
            return self.public_url.rstrip("/")
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host
        return f"http://{host}:{self.port}"
