"""generate_image_tool_call: an image from the images API of --model-endpoint, saved as an artifact.

On with --generate-image-enabled; the model is --image-model. With `reference_image_paths` the
request goes to the images API's edits endpoint (`/images/edits`, multipart, each image an
`image[]` part) instead of generations; each path is read with the agent's read rules (as the
read tool does: a file it may not read is `permission_denied`). The image is written to the
daemon's artifacts folder (where UploadArtifacts finds it) under a name made from the call's
`filename` (its last path component, safe characters only: the agent cannot name a path), never
replacing a file already there.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import re
import time
from pathlib import Path

from agent.v1.agent_pb2 import GenerateImageArgs, GenerateImageResult, GenerateImageSuccess
from agent.v1.common_pb2 import ToolError
from exec_daemon.kernel.config import off_without
from exec_daemon.kernel.context import CallContext
from exec_daemon.kernel.errors import CodedError, ErrorCode
from exec_daemon.kernel.spec import Effect, Hooks, RunModeRule, Subject, ToolSpec
from tools.models import ModelEndpoint, model_failure
from tools.subagent_media import Picture, read_agent_image
from tools.workspace import atomic_write

# The formats an images API answers, by their first bytes.
_FORMATS = (
    (b"\x89PNG\r\n\x1a\n", ".png", "image/png"),
    (b"\xff\xd8\xff", ".jpg", "image/jpeg"),
    (b"RIFF", ".webp", "image/webp"),
)
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
# Larger answers are refused: the image goes back in the result, within the message limit.
MAX_IMAGE_BYTES = 32 * 1024 * 1024
MAX_NAME_CHARS = 100
# What the images APIs take in one edit request (OpenAI's gpt-image-1: 16).
MAX_REFERENCE_IMAGES = 16


def _error(code: str, message: str) -> GenerateImageResult:
    return GenerateImageResult(error=ToolError(code=code, message=message))


async def generate_image(args: GenerateImageArgs, ctx: CallContext) -> GenerateImageResult:
    """Generates an image from a description; it is saved in the artifacts folder."""
    config = ctx.daemon.config
    if not config.generate_image_enabled:
        return _error("unavailable", off_without("image generation", "--generate-image-enabled"))
    if not args.description.strip():
        return _error("invalid_argument", "the image has no description")
    if len(args.reference_image_paths) > MAX_REFERENCE_IMAGES:
        return _error(
            "invalid_argument",
            f"{len(args.reference_image_paths)} reference images: give at most "
            f"{MAX_REFERENCE_IMAGES}",
        )
    try:
        references = [
            await asyncio.to_thread(read_agent_image, ctx.daemon, given, "reference image")
            for given in args.reference_image_paths
        ]
        data = await _generate(ctx, args.description, references)
        suffix, mime_type = _format_of(data)
        path = await asyncio.to_thread(
            _save, Path(config.artifacts_folder), args.filename, suffix, data
        )
    except CodedError as failure:
        return _error(failure.code, failure.message)
    return GenerateImageResult(
        success=GenerateImageSuccess(path=str(path), mime_type=mime_type, data=data)
    )


async def _generate(ctx: CallContext, description: str, references: list[Picture]) -> bytes:
    import openai

    endpoint = ctx.daemon.service(ModelEndpoint)
    client = endpoint.client("image generation")
    model = ctx.daemon.config.image_model
    try:
        if references:
            files = [
                (Path(picture.caption).name, picture.data, picture.mime) for picture in references
            ]
            response = await client.images.edit(model=model, prompt=description, image=files, n=1)
        else:
            response = await client.images.generate(model=model, prompt=description, n=1)
    except openai.OpenAIError as exc:
        raise model_failure(exc, "generate_image") from None
    encoded = response.data[0].b64_json if response.data else None
    if not encoded:
        raise CodedError(
            ErrorCode.REQUEST_FAILED,
            "the images API answered no image data (b64_json); a URL answer is not fetched",
        )
    if len(encoded) * 3 // 4 > MAX_IMAGE_BYTES:
        raise CodedError(
            ErrorCode.TOO_LARGE, f"the generated image is larger than {MAX_IMAGE_BYTES} bytes"
        )
    try:
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise CodedError(
            ErrorCode.REQUEST_FAILED, "the images API's b64_json is not base64"
        ) from None


def _format_of(data: bytes) -> tuple[str, str]:
    for magic, suffix, mime_type in _FORMATS:
        if data.startswith(magic):
            return suffix, mime_type
    raise CodedError(ErrorCode.REQUEST_FAILED, "the images API answered data that is not an image")


def artifact_name(filename: str, suffix: str) -> str:
    """A file name in the artifacts folder from what the agent asked for."""
    stem = _UNSAFE.sub("-", Path(filename).name).strip(".-")
    stem = Path(stem).stem if stem.lower().endswith((".png", ".jpg", ".jpeg", ".webp")) else stem
    stem = stem[:MAX_NAME_CHARS] or time.strftime("image-%Y%m%d-%H%M%S", time.gmtime())
    return stem + suffix


def _save(folder: Path, filename: str, suffix: str, data: bytes) -> Path:
    name = artifact_name(filename, suffix)
    path = folder / name
    number = 1
    while path.exists() or path.is_symlink():
        number += 1
        path = folder / f"{Path(name).stem}-{number}{suffix}"
    atomic_write(path, data)
    return path


GENERATE_IMAGE = ToolSpec(
    "generate_image_tool_call",
    generate_image,
    # It asks a remote service and saves a file outside the workspace (the artifacts folder).
    effects=Effect.MACHINE,
    run_mode=RunModeRule.UNGATED,
    hooks=Hooks("GenerateImage"),
    subject=lambda args: Subject(paths_read=tuple(args.reference_image_paths)),
)
