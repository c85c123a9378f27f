"""Tool handlers, one module per tool family. Each handler takes typed args and returns the typed result."""
