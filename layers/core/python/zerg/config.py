"""Configuration: one typed settings object, read from the environment.

Invariants:
- Every knob has a documented default (README "Configuration"); nothing is read from the
  environment anywhere else in the code base.
- A bad value fails fast with a message that names the variable, never a stack trace deep in a
  request. A ``ZERG_*`` variable that no setting knows is rejected too: a typo must not silently
  fall back to a default.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator


class ConfigError(ValueError):
    """Raised when the environment holds an invalid or unknown setting."""


def _default_data_dir(environ: dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    home = Path(env["HOME"]) if env.get("HOME") else Path.home()
    return Path(env.get("XDG_DATA_HOME") or home / ".local" / "share") / "zerg"


class Settings(BaseModel):
    """Each field's alias is its environment variable."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    # --- storage -------------------------------------------------------------------------
    database_url: str | None = Field(
        default=None,
        alias="DATABASE_URL",
        description="PostgreSQL URL; unset = the embedded server under ZERG_DATA_DIR/pg.",
    )
    data_dir: Path = Field(
        default_factory=_default_data_dir,
        alias="ZERG_DATA_DIR",
        description="Per-user directory for the embedded database and local artifacts.",
    )
    db_pool_max: int = Field(
        default=10, ge=1, le=200, alias="ZERG_DB_POOL_MAX"
    )
    artifact_backend: Literal["local", "s3"] = Field(
        default="local", alias="ZERG_ARTIFACT_BACKEND"
    )
    artifact_dir: Path | None = Field(
        default=None,
        alias="ZERG_ARTIFACT_DIR",
        description="Local artifact root; unset = ZERG_DATA_DIR/artifacts.",
    )
    artifact_bucket: str | None = Field(
        default=None, alias="ZERG_ARTIFACT_BUCKET"
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        default="INFO", alias="ZERG_LOG_LEVEL"
    )

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @property
    def artifact_root(self) -> Path:
        return self.artifact_dir or self.data_dir / "artifacts"

    def check(self) -> "Settings":
        if self.artifact_backend == "s3" and not self.artifact_bucket:
            raise ConfigError(
                "ZERG_ARTIFACT_BUCKET must be set when ZERG_ARTIFACT_BACKEND=s3"
            )
        return self


def _env_names() -> dict[str, str]:
    """Map each accepted environment variable name to its field name."""
    return {field.alias: name for name, field in Settings.model_fields.items() if field.alias}


def load_settings(environ: dict[str, str] | None = None) -> Settings:
    """Build settings from ``environ`` (default ``os.environ``), failing with a clear message."""
    env = dict(os.environ if environ is None else environ)
    known = _env_names()
    unknown = sorted(k for k in env if k.startswith("ZERG_") and k not in known)
    if unknown:
        raise ConfigError(
            f"unknown setting {unknown[0]}: not one of {', '.join(sorted(k for k in known if k.startswith('ZERG_')))}"
        )
    values = {k: v for k, v in env.items() if k in known and v != ""}
    values.setdefault("ZERG_DATA_DIR", str(_default_data_dir(env)))
    try:
        settings = Settings.model_validate(values)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = str(err["loc"][0]) if err["loc"] else "?"
        var = Settings.model_fields[field].alias if field in Settings.model_fields else field
        raise ConfigError(f"invalid {var}={env.get(var)!r}: {err['msg']}") from None
    return settings.check()


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (cached; tests call ``get_settings.cache_clear()``)."""
    return load_settings()
