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
    Config,
    EnvConfig,
    ReplayConfig,
)
from per_cli.errors import ConfigError

__all__ = [
    "AgentConfig",
    "Config",
    "ConfigError",
    "EnvConfig",
    "ReplayConfig",
    "apply_override",
    "build_section",
    "dump_config",
    "from_dict",
    "load_config",
    "parse_override",
    "read_yaml",
    "to_dict",
]
