"""Command confinement: the sandbox policy model and the confinement helper."""
