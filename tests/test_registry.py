"""The one map from ToolCall variant to handler covers the whole registry."""

from __future__ import annotations

import inspect

from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.registry import HANDLERS


def test_every_tool_call_variant_has_a_handler() -> None:
    variants = {field.name for field in ToolCall.DESCRIPTOR.oneofs_by_name["tool"].fields}
    assert set(HANDLERS) == variants


def test_handlers_are_coroutine_functions_taking_args_and_context() -> None:
    for variant, handler in HANDLERS.items():
        assert inspect.iscoroutinefunction(handler), variant
        assert len(inspect.signature(handler).parameters) == 2, variant
