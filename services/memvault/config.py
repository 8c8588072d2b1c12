"""Settings, read once from the environment (prefix ``MEMVAULT_``) and passed to constructors."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


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
    db_pool_size: int = Field(default=10, ge=1, description="Connections kept per gateway process.")

    redis_url: str | None = Field(default=None, description="Redis for jobs. Unset: jobs run in-process.")

    # Embeddings.
    embedding_provider: Literal["local", "openai"] = Field(default="local")
    embedding_model: str = Field(
        default="sentence-transformers/all-MiniLM-L6-v2",
        description="sentence-transformers model name or path (local) or model id (openai).",
    )
    embedding_dim: int = Field(default=384, description="Vector width; the schema stores vector(384).")
    embedding_batch_size: int = Field(default=64, ge=1)
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
    log_level: str = Field(default="INFO")

    # First start of an empty database.
    bootstrap_tenant: str = Field(default="default", description="Tenant created on first start.")

    def resolved_public_url(self) -> str:
        if self.public_url:
            return self.public_url.rstrip("/")
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host
        return f"http://{host}:{self.port}"
