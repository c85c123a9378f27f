"""PTY terminals (pty.py) and the workspace's .cursor/environment.json (environment.py)."""
