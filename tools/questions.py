"""ask_question_tool_call: questions for a person, answered through the ControlService.

The call holds until each of its questions is answered by ControlService.AnswerQuestion (the
orchestrator shows ListPendingQuestions to a person) or --question-timeout-seconds pass; an
abort of the call withdraws its questions. Questions live in memory (`PendingQuestions`).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field

from agent.v1.agent_pb2 import (
    AskQuestionArgs,
    AskQuestionResult,
    AskQuestionSuccess,
    Question,
    QuestionAnswer,
)
from agent.v1.common_pb2 import ToolError
from agent.v1.questions_pb2 import PendingQuestion
from exec_daemon.kernel.context import CallContext
from exec_daemon.kernel.errors import CodedError, ErrorCode
from exec_daemon.kernel.spec import Effect, Hooks, RunModeRule, ToolSpec, no_subject
from exec_daemon.kernel.state import Daemon

MAX_QUESTIONS_PER_CALL = 20
# Waiting calls across the daemon: each holds a call open, so their number is bounded.
MAX_PENDING_QUESTIONS = 200
MAX_ANSWER_CHARS = 64 * 1024


@dataclass
class Pending:
    shown: PendingQuestion
    answered: asyncio.Future[QuestionAnswer] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    # The other questions of the same call (this one included).
    siblings: list[Pending] = field(default_factory=list)


class PendingQuestions:
    """The questions waiting for an answer, by their daemon-unique id."""

    def __init__(self, daemon: Daemon) -> None:
        self._pending: dict[str, Pending] = {}

    def ask(
        self, agent_id: str, title: str, questions: list[Question], timeout_s: float
    ) -> list[Pending]:
        if len(self._pending) + len(questions) > MAX_PENDING_QUESTIONS:
            raise CodedError(
                ErrorCode.RESOURCE_EXHAUSTED,
                f"{len(self._pending)} questions are already waiting for an answer",
            )
        now_ms = int(time.time() * 1000)
        suffix = uuid.uuid4().hex[:12]
        asked = [
            Pending(
                PendingQuestion(
                    question_id=f"{question.id}-{suffix}",
                    asked_id=question.id,
                    agent_id=agent_id,
                    title=title,
                    prompt=question.prompt,
                    options=question.options,
                    allow_multiple=question.allow_multiple,
                    asked_at_ms=now_ms,
                    expires_at_ms=now_ms + int(timeout_s * 1000),
                )
            )
            for question in questions
        ]
        for pending in asked:
            pending.siblings = asked
            self._pending[pending.shown.question_id] = pending
        return asked

    def withdraw(self, asked: list[Pending]) -> None:
        for pending in asked:
            self._pending.pop(pending.shown.question_id, None)

    def listed(self) -> list[PendingQuestion]:
        return [pending.shown for pending in self._pending.values()]

    def answer(self, question_id: str, text: str, option_ids: list[str]) -> bool:
        """Answers one question; whether its call has now every answer. CodedError when the
        question is not waiting or the answer does not fit it."""
        pending = self._pending.get(question_id)
        if pending is None:
            raise CodedError(
                ErrorCode.NOT_FOUND, f"no question {question_id!r} is waiting for an answer"
            )
        _check_answer(pending.shown, text, option_ids)
        del self._pending[question_id]
        pending.answered.set_result(
            QuestionAnswer(
                question_id=pending.shown.asked_id,
                selected_option_ids=option_ids,
                free_text=text,
            )
        )
        return all(sibling.answered.done() for sibling in pending.siblings)


def _check_answer(question: PendingQuestion, text: str, option_ids: list[str]) -> None:
    known = {option.id for option in question.options}
    unknown = [option for option in option_ids if option not in known]
    if unknown:
        raise CodedError(
            ErrorCode.INVALID_ARGUMENT,
            f"question {question.question_id} has no option {unknown[0]!r}"
            + (f" (its options: {', '.join(sorted(known))})" if known else ""),
        )
    if len(set(option_ids)) > 1 and not question.allow_multiple:
        raise CodedError(
            ErrorCode.INVALID_ARGUMENT, f"question {question.question_id} takes one option"
        )
    if not text.strip() and not option_ids:
        raise CodedError(ErrorCode.INVALID_ARGUMENT, "the answer is empty")
    if len(text) > MAX_ANSWER_CHARS:
        raise CodedError(
            ErrorCode.INVALID_ARGUMENT, f"the answer is longer than {MAX_ANSWER_CHARS} characters"
        )


def _error(code: str, message: str) -> AskQuestionResult:
    return AskQuestionResult(error=ToolError(code=code, message=message))


def _invalid(args: AskQuestionArgs) -> str | None:
    if not args.questions:
        return "ask_question needs at least one question"
    if len(args.questions) > MAX_QUESTIONS_PER_CALL:
        return f"at most {MAX_QUESTIONS_PER_CALL} questions per call"
    ids = [question.id for question in args.questions]
    if len(set(ids)) != len(ids):
        return "two questions have the same id"
    for question in args.questions:
        if not question.prompt.strip():
            return f"question {question.id or '(no id)'} has no prompt"
    return None


async def ask_question(args: AskQuestionArgs, ctx: CallContext) -> AskQuestionResult:
    """Asks a person; waits for the answers (ControlService.AnswerQuestion)."""
    invalid = _invalid(args)
    if invalid:
        return _error("invalid_argument", invalid)
    questions = [
        question
        if question.id
        else Question(
            id=f"q{index + 1}",
            prompt=question.prompt,
            options=question.options,
            allow_multiple=question.allow_multiple,
        )
        for index, question in enumerate(args.questions)
    ]
    timeout_s = ctx.daemon.config.question_timeout_seconds
    pending_questions = ctx.daemon.service(PendingQuestions)
    try:
        asked = pending_questions.ask(ctx.agent_id, args.title, questions, timeout_s)
    except CodedError as failure:
        return _error(failure.code, failure.message)
    try:
        async with asyncio.timeout(timeout_s):
            answers = [await pending.answered for pending in asked]
    except TimeoutError:
        # The timeout cancelled the answer being awaited: cancelled counts as unanswered.
        left = [p.shown.asked_id for p in asked if not p.answered.done() or p.answered.cancelled()]
        return _error(
            "timeout",
            f"no answer to {', '.join(left)} within {timeout_s:g} s "
            "(--question-timeout-seconds); go on without it or ask again",
        )
    finally:
        pending_questions.withdraw(asked)
    return AskQuestionResult(success=AskQuestionSuccess(answers=answers))


ASK_QUESTION = ToolSpec(
    "ask_question_tool_call",
    ask_question,
    effects=Effect.NONE,
    run_mode=RunModeRule.UNGATED,
    hooks=Hooks("AskQuestion"),
    subject=no_subject,
)
