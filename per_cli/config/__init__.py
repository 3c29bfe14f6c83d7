"""Typed, validated run configuration: the schema (:mod:`.schema`) and how it is read (:mod:`.loading`)."""

from per_cli.config.loading import (
    apply_override,
    build_section,
    dump_config,
    from_dict,
    load_config,
    parse_override,
    read_yaml,
    to_dict,
)
from per_cli.config.schema import (
    AgentConfig,
    AtariConfig,
    Config,
    EnvConfig,
    LogConfig,
    MetricsConfig,
    ReplayConfig,
    TrainConfig,
)
from per_cli.errors import ConfigError

__all__ = [
    "AgentConfig",
    "AtariConfig",
    "Config",
    "ConfigError",
    "EnvConfig",
    "LogConfig",
    "MetricsConfig",
    "ReplayConfig",
    "TrainConfig",
    "apply_override",
    "build_section",
    "dump_config",
    "from_dict",
    "load_config",
    "parse_override",
    "read_yaml",
    "to_dict",
]
