from agent.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MouseButton(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MOUSE_BUTTON_UNSPECIFIED: _ClassVar[MouseButton]
    MOUSE_BUTTON_LEFT: _ClassVar[MouseButton]
    MOUSE_BUTTON_MIDDLE: _ClassVar[MouseButton]
    MOUSE_BUTTON_RIGHT: _ClassVar[MouseButton]
    MOUSE_BUTTON_BACK: _ClassVar[MouseButton]
    MOUSE_BUTTON_FORWARD: _ClassVar[MouseButton]

class ScrollDirection(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SCROLL_DIRECTION_UNSPECIFIED: _ClassVar[ScrollDirection]
    SCROLL_DIRECTION_UP: _ClassVar[ScrollDirection]
    SCROLL_DIRECTION_DOWN: _ClassVar[ScrollDirection]
    SCROLL_DIRECTION_LEFT: _ClassVar[ScrollDirection]
    SCROLL_DIRECTION_RIGHT: _ClassVar[ScrollDirection]

class RecordingMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RECORDING_MODE_UNSPECIFIED: _ClassVar[RecordingMode]
    RECORDING_MODE_START_RECORDING: _ClassVar[RecordingMode]
    RECORDING_MODE_SAVE_RECORDING: _ClassVar[RecordingMode]
    RECORDING_MODE_DISCARD_RECORDING: _ClassVar[RecordingMode]
MOUSE_BUTTON_UNSPECIFIED: MouseButton
MOUSE_BUTTON_LEFT: MouseButton
MOUSE_BUTTON_MIDDLE: MouseButton
MOUSE_BUTTON_RIGHT: MouseButton
MOUSE_BUTTON_BACK: MouseButton
MOUSE_BUTTON_FORWARD: MouseButton
SCROLL_DIRECTION_UNSPECIFIED: ScrollDirection
SCROLL_DIRECTION_UP: ScrollDirection
SCROLL_DIRECTION_DOWN: ScrollDirection
SCROLL_DIRECTION_LEFT: ScrollDirection
SCROLL_DIRECTION_RIGHT: ScrollDirection
RECORDING_MODE_UNSPECIFIED: RecordingMode
RECORDING_MODE_START_RECORDING: RecordingMode
RECORDING_MODE_SAVE_RECORDING: RecordingMode
RECORDING_MODE_DISCARD_RECORDING: RecordingMode

class Coordinate(_message.Message):
    __slots__ = ("x", "y")
    X_FIELD_NUMBER: _ClassVar[int]
    Y_FIELD_NUMBER: _ClassVar[int]
    x: int
    y: int
    def __init__(self, x: _Optional[int] = ..., y: _Optional[int] = ...) -> None: ...

class MouseMoveAction(_message.Message):
    __slots__ = ("coordinate",)
    COORDINATE_FIELD_NUMBER: _ClassVar[int]
    coordinate: Coordinate
    def __init__(self, coordinate: _Optional[_Union[Coordinate, _Mapping]] = ...) -> None: ...

class ClickAction(_message.Message):
    __slots__ = ("coordinate", "button", "count")
    COORDINATE_FIELD_NUMBER: _ClassVar[int]
    BUTTON_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    coordinate: Coordinate
    button: MouseButton
    count: int
    def __init__(self, coordinate: _Optional[_Union[Coordinate, _Mapping]] = ..., button: _Optional[_Union[MouseButton, str]] = ..., count: _Optional[int] = ...) -> None: ...

class MouseDownAction(_message.Message):
    __slots__ = ("coordinate", "button")
    COORDINATE_FIELD_NUMBER: _ClassVar[int]
    BUTTON_FIELD_NUMBER: _ClassVar[int]
    coordinate: Coordinate
    button: MouseButton
    def __init__(self, coordinate: _Optional[_Union[Coordinate, _Mapping]] = ..., button: _Optional[_Union[MouseButton, str]] = ...) -> None: ...

class MouseUpAction(_message.Message):
    __slots__ = ("coordinate", "button")
    COORDINATE_FIELD_NUMBER: _ClassVar[int]
    BUTTON_FIELD_NUMBER: _ClassVar[int]
    coordinate: Coordinate
    button: MouseButton
    def __init__(self, coordinate: _Optional[_Union[Coordinate, _Mapping]] = ..., button: _Optional[_Union[MouseButton, str]] = ...) -> None: ...

class DragAction(_message.Message):
    __slots__ = ("start", "end", "button")
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    BUTTON_FIELD_NUMBER: _ClassVar[int]
    start: Coordinate
    end: Coordinate
    button: MouseButton
    def __init__(self, start: _Optional[_Union[Coordinate, _Mapping]] = ..., end: _Optional[_Union[Coordinate, _Mapping]] = ..., button: _Optional[_Union[MouseButton, str]] = ...) -> None: ...

class ScrollAction(_message.Message):
    __slots__ = ("coordinate", "direction", "amount")
    COORDINATE_FIELD_NUMBER: _ClassVar[int]
    DIRECTION_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    coordinate: Coordinate
    direction: ScrollDirection
    amount: int
    def __init__(self, coordinate: _Optional[_Union[Coordinate, _Mapping]] = ..., direction: _Optional[_Union[ScrollDirection, str]] = ..., amount: _Optional[int] = ...) -> None: ...

class TypeAction(_message.Message):
    __slots__ = ("text",)
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class KeyAction(_message.Message):
    __slots__ = ("key",)
    KEY_FIELD_NUMBER: _ClassVar[int]
    key: str
    def __init__(self, key: _Optional[str] = ...) -> None: ...

class WaitAction(_message.Message):
    __slots__ = ("duration_ms",)
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    duration_ms: int
    def __init__(self, duration_ms: _Optional[int] = ...) -> None: ...

class ScreenshotAction(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CursorPositionAction(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ComputerUseAction(_message.Message):
    __slots__ = ("mouse_move", "click", "mouse_down", "mouse_up", "drag", "scroll", "type", "key", "wait", "screenshot", "cursor_position")
    MOUSE_MOVE_FIELD_NUMBER: _ClassVar[int]
    CLICK_FIELD_NUMBER: _ClassVar[int]
    MOUSE_DOWN_FIELD_NUMBER: _ClassVar[int]
    MOUSE_UP_FIELD_NUMBER: _ClassVar[int]
    DRAG_FIELD_NUMBER: _ClassVar[int]
    SCROLL_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    SCREENSHOT_FIELD_NUMBER: _ClassVar[int]
    CURSOR_POSITION_FIELD_NUMBER: _ClassVar[int]
    mouse_move: MouseMoveAction
    click: ClickAction
    mouse_down: MouseDownAction
    mouse_up: MouseUpAction
    drag: DragAction
    scroll: ScrollAction
    type: TypeAction
    key: KeyAction
    wait: WaitAction
    screenshot: ScreenshotAction
    cursor_position: CursorPositionAction
    def __init__(self, mouse_move: _Optional[_Union[MouseMoveAction, _Mapping]] = ..., click: _Optional[_Union[ClickAction, _Mapping]] = ..., mouse_down: _Optional[_Union[MouseDownAction, _Mapping]] = ..., mouse_up: _Optional[_Union[MouseUpAction, _Mapping]] = ..., drag: _Optional[_Union[DragAction, _Mapping]] = ..., scroll: _Optional[_Union[ScrollAction, _Mapping]] = ..., type: _Optional[_Union[TypeAction, _Mapping]] = ..., key: _Optional[_Union[KeyAction, _Mapping]] = ..., wait: _Optional[_Union[WaitAction, _Mapping]] = ..., screenshot: _Optional[_Union[ScreenshotAction, _Mapping]] = ..., cursor_position: _Optional[_Union[CursorPositionAction, _Mapping]] = ...) -> None: ...

class ComputerUseArgs(_message.Message):
    __slots__ = ("actions", "tool_call_id")
    ACTIONS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    actions: _containers.RepeatedCompositeFieldContainer[ComputerUseAction]
    tool_call_id: str
    def __init__(self, actions: _Optional[_Iterable[_Union[ComputerUseAction, _Mapping]]] = ..., tool_call_id: _Optional[str] = ...) -> None: ...

class ComputerUseSuccess(_message.Message):
    __slots__ = ("action_count", "duration_ms", "screenshot", "screenshot_path", "cursor_position", "log")
    ACTION_COUNT_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    SCREENSHOT_FIELD_NUMBER: _ClassVar[int]
    SCREENSHOT_PATH_FIELD_NUMBER: _ClassVar[int]
    CURSOR_POSITION_FIELD_NUMBER: _ClassVar[int]
    LOG_FIELD_NUMBER: _ClassVar[int]
    action_count: int
    duration_ms: int
    screenshot: bytes
    screenshot_path: str
    cursor_position: Coordinate
    log: str
    def __init__(self, action_count: _Optional[int] = ..., duration_ms: _Optional[int] = ..., screenshot: _Optional[bytes] = ..., screenshot_path: _Optional[str] = ..., cursor_position: _Optional[_Union[Coordinate, _Mapping]] = ..., log: _Optional[str] = ...) -> None: ...

class ComputerUseError(_message.Message):
    __slots__ = ("message", "action_index", "code")
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ACTION_INDEX_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    message: str
    action_index: int
    code: str
    def __init__(self, message: _Optional[str] = ..., action_index: _Optional[int] = ..., code: _Optional[str] = ...) -> None: ...

class ComputerUseResult(_message.Message):
    __slots__ = ("success", "error", "rejected", "aborted")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    success: ComputerUseSuccess
    error: ComputerUseError
    rejected: _common_pb2.Rejected
    aborted: _common_pb2.Aborted
    def __init__(self, success: _Optional[_Union[ComputerUseSuccess, _Mapping]] = ..., error: _Optional[_Union[ComputerUseError, _Mapping]] = ..., rejected: _Optional[_Union[_common_pb2.Rejected, _Mapping]] = ..., aborted: _Optional[_Union[_common_pb2.Aborted, _Mapping]] = ...) -> None: ...

class ComputerUseToolCall(_message.Message):
    __slots__ = ("args", "result")
    ARGS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    args: ComputerUseArgs
    result: ComputerUseResult
    def __init__(self, args: _Optional[_Union[ComputerUseArgs, _Mapping]] = ..., result: _Optional[_Union[ComputerUseResult, _Mapping]] = ...) -> None: ...

class RecordScreenArgs(_message.Message):
    __slots__ = ("mode", "save_as_filename", "tool_call_id")
    MODE_FIELD_NUMBER: _ClassVar[int]
    SAVE_AS_FILENAME_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    mode: RecordingMode
    save_as_filename: str
    tool_call_id: str
    def __init__(self, mode: _Optional[_Union[RecordingMode, str]] = ..., save_as_filename: _Optional[str] = ..., tool_call_id: _Optional[str] = ...) -> None: ...

class RecordScreenStartSuccess(_message.Message):
    __slots__ = ("was_already_recording",)
    WAS_ALREADY_RECORDING_FIELD_NUMBER: _ClassVar[int]
    was_already_recording: bool
    def __init__(self, was_already_recording: _Optional[bool] = ...) -> None: ...

class RecordScreenSaveSuccess(_message.Message):
    __slots__ = ("path", "duration_ms", "size_bytes")
    PATH_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    path: str
    duration_ms: int
    size_bytes: int
    def __init__(self, path: _Optional[str] = ..., duration_ms: _Optional[int] = ..., size_bytes: _Optional[int] = ...) -> None: ...

class RecordScreenDiscardSuccess(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RecordScreenResult(_message.Message):
    __slots__ = ("start_success", "save_success", "discard_success", "error", "rejected", "aborted")
    START_SUCCESS_FIELD_NUMBER: _ClassVar[int]
    SAVE_SUCCESS_FIELD_NUMBER: _ClassVar[int]
    DISCARD_SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    start_success: RecordScreenStartSuccess
    save_success: RecordScreenSaveSuccess
    discard_success: RecordScreenDiscardSuccess
    error: _common_pb2.ToolError
    rejected: _common_pb2.Rejected
    aborted: _common_pb2.Aborted
    def __init__(self, start_success: _Optional[_Union[RecordScreenStartSuccess, _Mapping]] = ..., save_success: _Optional[_Union[RecordScreenSaveSuccess, _Mapping]] = ..., discard_success: _Optional[_Union[RecordScreenDiscardSuccess, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ToolError, _Mapping]] = ..., rejected: _Optional[_Union[_common_pb2.Rejected, _Mapping]] = ..., aborted: _Optional[_Union[_common_pb2.Aborted, _Mapping]] = ...) -> None: ...

class RecordScreenToolCall(_message.Message):
    __slots__ = ("args", "result")
    ARGS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    args: RecordScreenArgs
    result: RecordScreenResult
    def __init__(self, args: _Optional[_Union[RecordScreenArgs, _Mapping]] = ..., result: _Optional[_Union[RecordScreenResult, _Mapping]] = ...) -> None: ...
