"""Settings: documented defaults, and bad values that fail fast naming the variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from zerg.config import ConfigError, load_settings


def test_defaults_need_no_environment():
    s = load_settings({"HOME": "/home/u"})
    assert s.database_url is None and s.artifact_backend == "local"
    assert s.data_dir == Path("/home/u/.local/share/zerg")
    assert s.artifact_root == Path("/home/u/.local/share/zerg/artifacts")


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"ZERG_DB_POOL_MAX": "many"}, "invalid ZERG_DB_POOL_MAX='many'"),
        ({"ZERG_DB_POOL_MAX": "0"}, "invalid ZERG_DB_POOL_MAX='0'"),
        ({"ZERG_ARTIFACT_BACKEND": "ftp"}, "invalid ZERG_ARTIFACT_BACKEND='ftp'"),
        ({"ZERG_LOG_LEVEL": "loud"}, "invalid ZERG_LOG_LEVEL='loud'"),
        ({"ZERG_ARTIFACT_BACKEND": "s3"}, "ZERG_ARTIFACT_BUCKET must be set"),
        ({"ZERG_ARTIFACTS_DIR": "/x"}, "unknown setting ZERG_ARTIFACTS_DIR"),
    ],
)
def test_bad_values_fail_fast_naming_the_variable(env, message):
    with pytest.raises(ConfigError) as err:
        load_settings(env)
    assert message in str(err.value)


def test_empty_value_means_default():
    assert load_settings({"ZERG_LOG_LEVEL": ""}).log_level == "INFO"
    assert load_settings({"ZERG_LOG_LEVEL": "debug"}).log_level == "DEBUG"
