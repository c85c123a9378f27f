"""Tracing of tool calls (OpenTelemetry)."""
