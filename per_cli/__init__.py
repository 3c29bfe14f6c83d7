"""per: a command-line experiment runner for studying experience replay in deep Q-learning."""

__version__ = "0.1.0"
