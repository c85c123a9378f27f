"""exec-daemon: runs an AI coding agent's tools inside its VM for a remote orchestrator."""

__version__ = "0.1.0"
