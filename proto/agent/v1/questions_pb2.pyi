from agent.v1 import agent_pb2 as _agent_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PendingQuestion(_message.Message):
    __slots__ = ("question_id", "asked_id", "agent_id", "title", "prompt", "options", "allow_multiple", "asked_at_ms", "expires_at_ms")
    QUESTION_ID_FIELD_NUMBER: _ClassVar[int]
    ASKED_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    ALLOW_MULTIPLE_FIELD_NUMBER: _ClassVar[int]
    ASKED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    question_id: str
    asked_id: str
    agent_id: str
    title: str
    prompt: str
    options: _containers.RepeatedCompositeFieldContainer[_agent_pb2.QuestionOption]
    allow_multiple: bool
    asked_at_ms: int
    expires_at_ms: int
    def __init__(self, question_id: _Optional[str] = ..., asked_id: _Optional[str] = ..., agent_id: _Optional[str] = ..., title: _Optional[str] = ..., prompt: _Optional[str] = ..., options: _Optional[_Iterable[_Union[_agent_pb2.QuestionOption, _Mapping]]] = ..., allow_multiple: _Optional[bool] = ..., asked_at_ms: _Optional[int] = ..., expires_at_ms: _Optional[int] = ...) -> None: ...

class ListPendingQuestionsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListPendingQuestionsResponse(_message.Message):
    __slots__ = ("questions",)
    QUESTIONS_FIELD_NUMBER: _ClassVar[int]
    questions: _containers.RepeatedCompositeFieldContainer[PendingQuestion]
    def __init__(self, questions: _Optional[_Iterable[_Union[PendingQuestion, _Mapping]]] = ...) -> None: ...

class AnswerQuestionRequest(_message.Message):
    __slots__ = ("question_id", "answer", "option_ids")
    QUESTION_ID_FIELD_NUMBER: _ClassVar[int]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    OPTION_IDS_FIELD_NUMBER: _ClassVar[int]
    question_id: str
    answer: str
    option_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, question_id: _Optional[str] = ..., answer: _Optional[str] = ..., option_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class AnswerQuestionResponse(_message.Message):
    __slots__ = ("call_answered",)
    CALL_ANSWERED_FIELD_NUMBER: _ClassVar[int]
    call_answered: bool
    def __init__(self, call_answered: _Optional[bool] = ...) -> None: ...
