"""What a subagent's model sees beyond text: images, as image parts of the OpenAI-compatible chat
message (`{"type": "image_url", "image_url": {"url": "data:image/webp;base64,..."}}`).

- A tool result carrying an image (computer_use's screenshot, read's image) is answered as text
  without the image's bytes; the image follows in a user message (a `tool` message may hold text
  only), one part per image, each after a line saying which call it came from.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from tools.files import SNIFF_BYTES, image_mime

# Images from tool calls kept in a conversation: older ones are replaced by a line of text
# (every model turn sends the whole conversation again).
KEPT_TOOL_IMAGES = 4
TOOL_IMAGE_PREFIX = "Image from the "
# About a thousand tokens, as providers charge for a screenshot-sized image.
IMAGE_CHARS = 4000
DROPPED_IMAGE = "[an earlier image, dropped to keep the conversation small]"


@dataclass(frozen=True)
class Picture:
    mime: str
    data: bytes
    caption: str


def image_part(picture: Picture) -> dict[str, Any]:
    encoded = base64.b64encode(picture.data).decode("ascii")
    return {"type": "image_url", "image_url": {"url": f"data:{picture.mime};base64,{encoded}"}}


def pictures_message(intro: str, pictures: Sequence[Picture]) -> dict[str, Any]:
    """A user message: `intro`, then each picture after its caption."""
    content: list[dict[str, Any]] = [{"type": "text", "text": intro}] if intro else []
    for picture in pictures:
        content.append({"type": "text", "text": picture.caption})
        content.append(image_part(picture))
    return {"role": "user", "content": content}


def tool_images_message(pictures: Sequence[Picture]) -> dict[str, Any]:
    return pictures_message("", pictures)


def split_images(result: Message, call_name: str) -> tuple[Message, list[Picture]]:
    """A copy of `result` without the bytes of the images it holds, and those images."""
    copy = type(result)()
    copy.CopyFrom(result)
    found: list[Picture] = []
    _take_images(copy, call_name, found)
    return copy, found


def _take_images(message: Message, call_name: str, found: list[Picture]) -> None:
    for field, value in message.ListFields():
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            if field.message_type is None or field.message_type.GetOptions().map_entry:
                continue
            for child in value if field.is_repeated else (value,):
                _take_images(child, call_name, found)
        elif field.type == FieldDescriptor.TYPE_BYTES and not field.is_repeated:
            mime = image_mime(value[:SNIFF_BYTES])
            if mime is not None:
                found.append(
                    Picture(mime, value, f"{TOOL_IMAGE_PREFIX}{call_name} call ({field.name}):")
                )
                message.ClearField(field.name)


def drop_old_tool_images(messages: list[dict[str, Any]]) -> None:
    """Keeps the last KEPT_TOOL_IMAGES images that tool calls answered; earlier ones become a
    line of text (the attachments a Task was given stay)."""
    seen = 0
    for message in reversed(messages):
        content = message.get("content")
        if message["role"] != "user" or not isinstance(content, list) or not content:
            continue
        first = content[0]
        if first.get("type") != "text" or not first["text"].startswith(TOOL_IMAGE_PREFIX):
            continue
        for index, part in enumerate(content):
            if part.get("type") == "image_url":
                seen += 1
                if seen > KEPT_TOOL_IMAGES:
                    content[index] = {"type": "text", "text": DROPPED_IMAGE}


def conversation_chars(messages: list[dict[str, Any]]) -> int:
    """The conversation's size in characters for a token estimate, an image counted as
    IMAGE_CHARS (its base64 is no measure of what a model charges for it)."""
    total = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            for part in content:
                total += IMAGE_CHARS if part.get("type") == "image_url" else len(str(part))
            total += len(json.dumps({k: v for k, v in message.items() if k != "content"}))
        else:
            total += len(json.dumps(message))
    return total
