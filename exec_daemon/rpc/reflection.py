"""gRPC server reflection (v1 and v1alpha) for grpcurl and `buf curl`.

connectrpc-grpcreflect describes files with protobuf-py descriptors; our messages are Google
protobuf, so each file descriptor is carried over in its serialized form. The compiled-in
descriptors carry no comments; scripts/gen-protos also writes agent/v1/descriptors.binpb (protoc's
descriptors of the same files, with source info), and reflection serves those, so `grpcurl
describe` shows the proto's comments (e.g. that `ShellArgs.timeout` is in milliseconds).
tests/test_protos.py keeps them and the generated code in step.

Carrying the files over takes a good part of start-up's CPU beside the imports (tenths of a
second on a loaded machine), and few daemons are ever asked: it is done on the first reflection
request (in a worker thread, so the event loop keeps serving), once per process.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib import resources
from typing import TYPE_CHECKING

from connectrpc.interceptor import Interceptor
from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import FileDescriptor

from exec_daemon.rpc.asgi import ASGIApp, Receive, Scope, Send

if TYPE_CHECKING:
    from protobuf import DescFile

V1_PREFIX = "/grpc.reflection.v1.ServerReflection/"
V1ALPHA_PREFIX = "/grpc.reflection.v1alpha.ServerReflection/"


def commented_descriptors() -> dict[str, descriptor_pb2.FileDescriptorProto]:
    """agent/v1/descriptors.binpb by file name (package data: a wheel has it too)."""
    data = resources.files("agent.v1").joinpath("descriptors.binpb").read_bytes()
    return {file.name: file for file in descriptor_pb2.FileDescriptorSet.FromString(data).file}


def _well_known() -> dict[str, DescFile]:
    from protobuf.wkt.google.protobuf import (
        any_pb,
        descriptor_pb,
        duration_pb,
        empty_pb,
        field_mask_pb,
        struct_pb,
        timestamp_pb,
        wrappers_pb,
    )

    modules = (any_pb, descriptor_pb, duration_pb, empty_pb, field_mask_pb, struct_pb)
    return {module.desc().name: module.desc() for module in (*modules, timestamp_pb, wrappers_pb)}


def _convert(
    file: FileDescriptor,
    done: dict[str, DescFile],
    commented: Mapping[str, descriptor_pb2.FileDescriptorProto],
) -> DescFile:
    from protobuf._codegen import file_desc  # the loader protobuf-py's own generated code uses

    if file.name in done:
        return done[file.name]
    dependencies = [_convert(dep, done, commented) for dep in file.dependencies]
    proto = commented.get(file.name)
    if proto is None:
        proto = descriptor_pb2.FileDescriptorProto()
        file.CopyToProto(proto)
    converted = file_desc(proto.SerializeToString(), dependencies, {})
    done[file.name] = converted
    return converted


_CONVERTED: dict[tuple[str, ...], list[DescFile]] = {}
_CONVERTING = threading.Lock()


def described(files: Sequence[FileDescriptor]) -> list[DescFile]:
    """`files` as protobuf-py descriptors; converted once per process (any thread)."""
    key = tuple(file.name for file in files)
    with _CONVERTING:
        if key not in _CONVERTED:
            done = _well_known()
            commented = commented_descriptors()
            _CONVERTED[key] = [_convert(file, done, commented) for file in files]
        return _CONVERTED[key]


class _OnFirstCall:
    """An ASGI app made by `build` (in a worker thread) when it is first called."""

    def __init__(self, build: Callable[[], ASGIApp]) -> None:
        self._build = build
        self._app: ASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._app is None:
            # Two first calls at once may both build: `described` converts once, and an app
            # is cheap; the second one built is kept.
            self._app = await asyncio.to_thread(self._build)
        await self._app(scope, receive, send)


def reflection_apps(
    files: Sequence[FileDescriptor], interceptors: Iterable[Interceptor]
) -> dict[str, ASGIApp]:
    """The ASGI apps serving reflection, keyed by their path prefix; built when first asked."""
    interceptors = list(interceptors)

    def v1() -> ASGIApp:
        from connectrpc_grpcreflect import ServerReflectionASGIApplication, ServerReflectionService

        service = ServerReflectionService(*described(files))
        return ServerReflectionASGIApplication(service, interceptors=interceptors)  # type: ignore[return-value]

    def v1alpha() -> ASGIApp:
        from connectrpc_grpcreflect import (
            ServerReflectionAlphaASGIApplication,
            ServerReflectionAlphaService,
        )

        service = ServerReflectionAlphaService(*described(files))
        return ServerReflectionAlphaASGIApplication(service, interceptors=interceptors)  # type: ignore[return-value]

    return {V1_PREFIX: _OnFirstCall(v1), V1ALPHA_PREFIX: _OnFirstCall(v1alpha)}
