"""gRPC server reflection (v1 and v1alpha) for grpcurl and `buf curl`.

connectrpc-grpcreflect describes files with protobuf-py descriptors; our messages are Google
protobuf, so each file descriptor is carried over in its serialized form.
"""

from __future__ import annotations

from collections.abc import Iterable

from connectrpc.interceptor import Interceptor
from connectrpc_grpcreflect import (
    ServerReflectionAlphaASGIApplication,
    ServerReflectionAlphaService,
    ServerReflectionASGIApplication,
    ServerReflectionService,
)
from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import FileDescriptor
from protobuf import DescFile
from protobuf._codegen import file_desc  # the loader protobuf-py's own generated code uses
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

_WELL_KNOWN: dict[str, DescFile] = {
    module.desc().name: module.desc()
    for module in (
        any_pb,
        descriptor_pb,
        duration_pb,
        empty_pb,
        field_mask_pb,
        struct_pb,
        timestamp_pb,
        wrappers_pb,
    )
}


def _convert(file: FileDescriptor, done: dict[str, DescFile]) -> DescFile:
    if file.name in done:
        return done[file.name]
    if file.name in _WELL_KNOWN:
        return _WELL_KNOWN[file.name]
    dependencies = [_convert(dep, done) for dep in file.dependencies]
    proto = descriptor_pb2.FileDescriptorProto()
    file.CopyToProto(proto)
    converted = file_desc(proto.SerializeToString(), dependencies, {})
    done[file.name] = converted
    return converted


def reflection_apps(
    files: Iterable[FileDescriptor], interceptors: Iterable[Interceptor]
) -> dict[str, object]:
    """The ASGI apps serving reflection, keyed by their path prefix."""
    done: dict[str, DescFile] = {}
    descs = [_convert(file, done) for file in files]
    interceptors = list(interceptors)
    return {
        "/grpc.reflection.v1.ServerReflection/": ServerReflectionASGIApplication(
            ServerReflectionService(*descs), interceptors=interceptors
        ),
        "/grpc.reflection.v1alpha.ServerReflection/": ServerReflectionAlphaASGIApplication(
            ServerReflectionAlphaService(*descs), interceptors=interceptors
        ),
    }
