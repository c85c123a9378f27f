"""The kernel: what every layer builds on; imports nothing else of the project."""
