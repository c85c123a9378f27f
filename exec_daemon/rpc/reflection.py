"""gRPC server reflection (v1 and v1alpha) for grpcurl and `buf curl`.

connectrpc-grpcreflect describes files with protobuf-py descriptors; our messages are Google
protobuf, so each file descriptor is carried over in its serialized form. The compiled-in
descriptors carry no comments; scripts/gen-protos also writes agent/v1/descriptors.binpb (protoc's
descriptors of the same files, with source info), and reflection serves those, so `grpcurl
describe` shows the proto's comments (e.g. that `ShellArgs.timeout` is in milliseconds).
tests/test_protos.py keeps them and the generated code in step.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from importlib import resources

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


def commented_descriptors() -> dict[str, descriptor_pb2.FileDescriptorProto]:
    """agent/v1/descriptors.binpb by file name (package data: a wheel has it too)."""
    data = resources.files("agent.v1").joinpath("descriptors.binpb").read_bytes()
    return {file.name: file for file in descriptor_pb2.FileDescriptorSet.FromString(data).file}


def _convert(
    file: FileDescriptor,
    done: dict[str, DescFile],
    commented: Mapping[str, descriptor_pb2.FileDescriptorProto],
) -> DescFile:
    if file.name in done:
        return done[file.name]
    if file.name in _WELL_KNOWN:
        return _WELL_KNOWN[file.name]
    dependencies = [_convert(dep, done, commented) for dep in file.dependencies]
    proto = commented.get(file.name)
    if proto is None:
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
    commented = commented_descriptors()
    descs = [_convert(file, done, commented) for file in files]
    interceptors = list(interceptors)
    return {
        "/grpc.reflection.v1.ServerReflection/": ServerReflectionASGIApplication(
            ServerReflectionService(*descs), interceptors=interceptors
        ),
        "/grpc.reflection.v1alpha.ServerReflection/": ServerReflectionAlphaASGIApplication(
            ServerReflectionAlphaService(*descs), interceptors=interceptors
        ),
    }
