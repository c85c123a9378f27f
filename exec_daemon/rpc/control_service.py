"""agent.v1.ControlService: the daemon's management API (one method per RPC)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncGenerator, AsyncIterator

from connectrpc.code import Code
from connectrpc.errors import ConnectError
from connectrpc.request import RequestContext

from agent.v1.context_pb2 import (
    AgentContextChange,
    GetAgentContextRequest,
    GetAgentContextResponse,
    ListMcpToolsRequest,
    ListMcpToolsResponse,
    WatchAgentContextRequest,
)
from agent.v1.control_connect import ControlService as ControlServiceBase
from agent.v1.control_pb2 import (
    Artifact,
    ArtifactFailure,
    DirectoryEntry,
    DownloadCursorServerRequest,
    DownloadCursorServerResponse,
    ExecRequest,
    GetDiffOmittedFile,
    GetDiffRequest,
    GetDiffResponse,
    GetMcpRefreshTokensRequest,
    GetMcpRefreshTokensResponse,
    GetWorkspaceChangesHashRequest,
    GetWorkspaceChangesHashResponse,
    ListArtifactsRequest,
    ListArtifactsResponse,
    ListDirectoryRequest,
    ListDirectoryResponse,
    PingRequest,
    PingResponse,
    ReadBinaryFileRequest,
    ReadBinaryFileResponse,
    ReadTextFileRequest,
    ReadTextFileResponse,
    RefreshGithubAccessTokenRequest,
    RefreshGithubAccessTokenResponse,
    UpdateEnvironmentVariablesRequest,
    UpdateEnvironmentVariablesResponse,
    UploadArtifactsRequest,
    UploadArtifactsResponse,
    WarmRemoteAccessServerRequest,
    WarmRemoteAccessServerResponse,
    WriteBinaryFileRequest,
    WriteBinaryFileResponse,
    WriteTextFileRequest,
    WriteTextFileResponse,
)
from agent.v1.exec_pb2 import ExecClientMessage, ExecServerMessage, ExecStreamElement
from agent.v1.pool_pb2 import (
    GetSandboxInfoRequest,
    GetSandboxInfoResponse,
    InitSandboxRequest,
    InitSandboxResponse,
)
from agent.v1.questions_pb2 import (
    AnswerQuestionRequest,
    AnswerQuestionResponse,
    ListPendingQuestionsRequest,
    ListPendingQuestionsResponse,
)
from agent.v1.record_pb2 import GetSessionRecordRequest, SessionRecordEntry
from agent.v1.takeover_pb2 import GetDesktopControlRequest, GetDesktopControlResponse
from exec_daemon import __version__
from exec_daemon.guards.redaction import (
    redact_outgoing_text,
    redact_outgoing_window,
    secret_context_bytes,
)
from exec_daemon.kernel.desktop_control import DesktopControl
from exec_daemon.kernel.errors import CodedError
from exec_daemon.kernel.lifecycle import Lifecycle
from exec_daemon.kernel.usage import sandbox_usage
from exec_daemon.rpc import agent_context, artifacts, changes, files, github_token, remote_server
from exec_daemon.rpc.dispatch import Dispatcher
from exec_daemon.rpc.exec_service import ExecStreamSession, rpc_extras
from exec_daemon.rpc.ide import IdeServer, ide_message
from exec_daemon.rpc.ide import install as ide_install
from exec_daemon.rpc.pool import ALREADY_CLAIMED, NOT_WAITING, daemon_user
from exec_daemon.telemetry.session_record import SessionRecord
from tools import mcp
from tools.questions import PendingQuestions

# GetSessionRecord reads this many entries at a time off the event loop.
RECORD_BATCH = 256


def _connect_error(failure: CodedError) -> ConnectError:
    return ConnectError(Code[failure.code.upper()], failure.message)


class ControlService(ControlServiceBase):
    def __init__(self, dispatcher: Dispatcher) -> None:
        self._dispatcher = dispatcher
        self._daemon = dispatcher.daemon

    async def ping(
        self, request: PingRequest, ctx: RequestContext[PingRequest, PingResponse]
    ) -> PingResponse:
        return PingResponse(
            version=__version__,
            uptime_ms=self._daemon.uptime_ms(),
            pid=os.getpid(),
            workspace=self._daemon.workspace,
        )

    async def init_sandbox(
        self,
        request: InitSandboxRequest,
        ctx: RequestContext[InitSandboxRequest, InitSandboxResponse],
    ) -> InitSandboxResponse:
        """A bound daemon refuses it: its pool's one claim was answered by exec_daemon/rpc/pool.py."""
        waited = self._daemon.service(Lifecycle).waited_for_init
        raise ConnectError(Code.FAILED_PRECONDITION, ALREADY_CLAIMED if waited else NOT_WAITING)

    async def get_sandbox_info(
        self,
        request: GetSandboxInfoRequest,
        ctx: RequestContext[GetSandboxInfoRequest, GetSandboxInfoResponse],
    ) -> GetSandboxInfoResponse:
        lifecycle = self._daemon.service(Lifecycle)
        usage = await asyncio.to_thread(sandbox_usage, self._daemon.config.workspace)
        return GetSandboxInfoResponse(
            version=__version__,
            uptime_ms=lifecycle.uptime_ms(),
            claimed=lifecycle.claimed,
            state=lifecycle.phase.value,
            metadata=dict(lifecycle.metadata),
            cpu_count=usage.cpu_count,
            memory_used_bytes=usage.memory_used_bytes,
            memory_total_bytes=usage.memory_total_bytes,
            disk_used_bytes=usage.disk_used_bytes,
            disk_total_bytes=usage.disk_total_bytes,
            process_count=usage.process_count,
            workspace=self._daemon.workspace,
            user=lifecycle.user or daemon_user().pw_name,
        )

    def exec(
        self, request: ExecRequest, ctx: RequestContext[ExecRequest, ExecServerMessage]
    ) -> AsyncIterator[ExecServerMessage]:
        """One call, answered exactly like id 0 of an ExecStream (heartbeats included)."""
        session = ExecStreamSession(
            self._dispatcher,
            self._daemon.config.heartbeat_seconds,
            rpc_extras(ctx.request_headers),
        )
        return session.serve(_single_call(request))

    async def update_environment_variables(
        self,
        request: UpdateEnvironmentVariablesRequest,
        ctx: RequestContext[UpdateEnvironmentVariablesRequest, UpdateEnvironmentVariablesResponse],
    ) -> UpdateEnvironmentVariablesResponse:
        count = self._daemon.env.update(
            dict(request.env), replace=request.replace, unset=list(request.unset)
        )
        return UpdateEnvironmentVariablesResponse(variable_count=count)

    async def list_pending_questions(
        self,
        request: ListPendingQuestionsRequest,
        ctx: RequestContext[ListPendingQuestionsRequest, ListPendingQuestionsResponse],
    ) -> ListPendingQuestionsResponse:
        """ask_question's questions waiting for a person (tools/questions.py)."""
        listed = self._daemon.service(PendingQuestions).listed()
        return ListPendingQuestionsResponse(questions=listed)

    async def answer_question(
        self,
        request: AnswerQuestionRequest,
        ctx: RequestContext[AnswerQuestionRequest, AnswerQuestionResponse],
    ) -> AnswerQuestionResponse:
        pending = self._daemon.service(PendingQuestions)
        try:
            done = pending.answer(request.question_id, request.answer, list(request.option_ids))
        except CodedError as failure:
            raise _connect_error(failure) from None
        return AnswerQuestionResponse(call_answered=done)

    async def get_mcp_refresh_tokens(
        self,
        request: GetMcpRefreshTokensRequest,
        ctx: RequestContext[GetMcpRefreshTokensRequest, GetMcpRefreshTokensResponse],
    ) -> GetMcpRefreshTokensResponse:
        """The OAuth data kept (in memory) for each MCP server (tools/mcp_oauth.py)."""
        return GetMcpRefreshTokensResponse(tokens=mcp.refresh_tokens(self._daemon))

    # --- Workspace files (logic in files.py and changes.py) ---

    async def list_directory(
        self,
        request: ListDirectoryRequest,
        ctx: RequestContext[ListDirectoryRequest, ListDirectoryResponse],
    ) -> ListDirectoryResponse:
        try:
            entries = await files.list_directory(self._daemon.workspace, request.path)
        except CodedError as failure:
            raise _connect_error(failure) from None
        return ListDirectoryResponse(
            entries=[
                DirectoryEntry(
                    name=entry.name,
                    is_directory=entry.is_directory,
                    is_symlink=entry.is_symlink,
                    size=entry.size,
                    modified_ms=entry.modified_ms,
                    mode=entry.mode,
                )
                for entry in entries
            ]
        )

    async def read_text_file(
        self,
        request: ReadTextFileRequest,
        ctx: RequestContext[ReadTextFileRequest, ReadTextFileResponse],
    ) -> ReadTextFileResponse:
        limit = self._daemon.config.max_message_bytes
        try:
            window = await files.read_text_file(
                self._daemon.workspace,
                request.path,
                request.offset,
                request.length,
                limit,
                context_bytes=secret_context_bytes(self._daemon),
            )
        except CodedError as failure:
            raise _connect_error(failure) from None
        at_end = window.next_offset >= window.total_size
        content, covered = await redact_outgoing_window(
            self._daemon, window.text, before=window.before, at_end=at_end
        )
        # A possible start of a secret left for the next window is read again there.
        next_offset = window.next_offset - len(window.text[covered:].encode("utf-8"))
        return ReadTextFileResponse(
            content=content,
            total_size=window.total_size,
            eof=next_offset >= window.total_size,
            next_offset=next_offset,
        )

    async def write_text_file(
        self,
        request: WriteTextFileRequest,
        ctx: RequestContext[WriteTextFileRequest, WriteTextFileResponse],
    ) -> WriteTextFileResponse:
        data = request.content.encode("utf-8")
        try:
            written = await files.write_file(self._daemon.workspace, request.path, data)
        except CodedError as failure:
            raise _connect_error(failure) from None
        return WriteTextFileResponse(bytes_written=written)

    async def read_binary_file(
        self,
        request: ReadBinaryFileRequest,
        ctx: RequestContext[ReadBinaryFileRequest, ReadBinaryFileResponse],
    ) -> ReadBinaryFileResponse:
        limit = self._daemon.config.max_message_bytes
        try:
            data, size = await files.read_binary_file(
                self._daemon.workspace, request.path, request.offset, request.length, limit
            )
        except CodedError as failure:
            raise _connect_error(failure) from None
        return ReadBinaryFileResponse(
            data=data, total_size=size, eof=request.offset + len(data) >= size
        )

    async def write_binary_file(
        self,
        request: WriteBinaryFileRequest,
        ctx: RequestContext[WriteBinaryFileRequest, WriteBinaryFileResponse],
    ) -> WriteBinaryFileResponse:
        workspace = self._daemon.workspace
        try:
            if request.append:
                size = await files.append_file(workspace, request.path, request.data)
            else:
                size = await files.write_file(workspace, request.path, request.data)
        except CodedError as failure:
            raise _connect_error(failure) from None
        return WriteBinaryFileResponse(bytes_written=len(request.data), total_size=size)

    async def get_diff(
        self, request: GetDiffRequest, ctx: RequestContext[GetDiffRequest, GetDiffResponse]
    ) -> GetDiffResponse:
        limit = self._daemon.config.max_message_bytes - files.MESSAGE_OVERHEAD
        try:
            diff = await changes.workspace_diff(
                self._daemon, request.ref, limit, list(request.paths)
            )
        except CodedError as failure:
            raise _connect_error(failure) from None
        omitted = [
            GetDiffOmittedFile(path=file.path, size=file.size, reason=file.reason)
            for file in diff.omitted
        ]
        return GetDiffResponse(
            diff=await redact_outgoing_text(self._daemon, diff.text), omitted=omitted
        )

    async def get_workspace_changes_hash(
        self,
        request: GetWorkspaceChangesHashRequest,
        ctx: RequestContext[GetWorkspaceChangesHashRequest, GetWorkspaceChangesHashResponse],
    ) -> GetWorkspaceChangesHashResponse:
        try:
            digest = await changes.workspace_changes_hash(self._daemon)
        except CodedError as failure:
            raise _connect_error(failure) from None
        return GetWorkspaceChangesHashResponse(hash=digest)

    # --- GitHub, artifacts, Cursor's remote server (logic in github_token.py, artifacts.py,
    # remote_server.py) ---

    async def refresh_github_access_token(
        self,
        request: RefreshGithubAccessTokenRequest,
        ctx: RequestContext[RefreshGithubAccessTokenRequest, RefreshGithubAccessTokenResponse],
    ) -> RefreshGithubAccessTokenResponse:
        try:
            github_token.store_token(self._daemon, request.access_token)
        except github_token.TokenRejected as exc:
            raise ConnectError(Code.INVALID_ARGUMENT, str(exc)) from None
        return RefreshGithubAccessTokenResponse(updated=True)

    async def list_artifacts(
        self,
        request: ListArtifactsRequest,
        ctx: RequestContext[ListArtifactsRequest, ListArtifactsResponse],
    ) -> ListArtifactsResponse:
        found = await artifacts.list_artifacts(self._daemon)
        return ListArtifactsResponse(artifacts=[_artifact(info) for info in found])

    async def upload_artifacts(
        self,
        request: UploadArtifactsRequest,
        ctx: RequestContext[UploadArtifactsRequest, UploadArtifactsResponse],
    ) -> UploadArtifactsResponse:
        try:
            outcome = await artifacts.upload_artifacts(
                self._daemon, list(request.paths), request.upload_url
            )
        except CodedError as failure:
            raise _connect_error(failure) from None
        return UploadArtifactsResponse(
            uploaded=[_artifact(info) for info in outcome.uploaded],
            failed=[path for path, _reason in outcome.failures],
            failures=[ArtifactFailure(path=path, reason=why) for path, why in outcome.failures],
        )

    async def warm_remote_access_server(
        self,
        request: WarmRemoteAccessServerRequest,
        ctx: RequestContext[WarmRemoteAccessServerRequest, WarmRemoteAccessServerResponse],
    ) -> WarmRemoteAccessServerResponse:
        try:
            url = await self._daemon.service(IdeServer).warm(request.commit)
        except CodedError as failure:
            raise _connect_error(failure) from None
        return WarmRemoteAccessServerResponse(ready=True, message=ide_message(url))

    async def download_cursor_server(
        self,
        request: DownloadCursorServerRequest,
        ctx: RequestContext[DownloadCursorServerRequest, DownloadCursorServerResponse],
    ) -> DownloadCursorServerResponse:
        if not request.url:
            try:
                home = await ide_install(self._daemon.config.ide_folder, request.commit)
            except CodedError as failure:
                raise _connect_error(failure) from None
            return DownloadCursorServerResponse(path=str(home))
        try:
            path, size, digest = await remote_server.download_cursor_server(
                self._daemon, request.commit, request.url
            )
        except CodedError as failure:
            raise _connect_error(failure) from None
        return DownloadCursorServerResponse(path=str(path), size_bytes=size, sha256=digest)

    # --- The agent's context (logic in agent_context.py) ---

    async def get_agent_context(
        self,
        request: GetAgentContextRequest,
        ctx: RequestContext[GetAgentContextRequest, GetAgentContextResponse],
    ) -> GetAgentContextResponse:
        try:
            return await agent_context.get_agent_context(self._daemon, request)
        except CodedError as failure:
            raise _connect_error(failure) from None

    async def list_mcp_tools(
        self,
        request: ListMcpToolsRequest,
        ctx: RequestContext[ListMcpToolsRequest, ListMcpToolsResponse],
    ) -> ListMcpToolsResponse:
        servers, problems = await agent_context.list_mcp_tools(self._daemon)
        return ListMcpToolsResponse(servers=servers, problems=problems)

    def watch_agent_context(
        self,
        request: WatchAgentContextRequest,
        ctx: RequestContext[WatchAgentContextRequest, AgentContextChange],
    ) -> AsyncIterator[AgentContextChange]:
        return _connect_errors(agent_context.watch_agent_context(self._daemon))

    async def get_desktop_control(
        self,
        request: GetDesktopControlRequest,
        ctx: RequestContext[GetDesktopControlRequest, GetDesktopControlResponse],
    ) -> GetDesktopControlResponse:
        state = self._daemon.service(DesktopControl).state()
        return GetDesktopControlResponse(
            person_in_control=state.person_in_control,
            since_unix_ms=state.since_unix_ms,
            viewers=state.viewers,
            controllers=state.controllers,
            novnc_port=self._daemon.config.novnc_port,
        )

    def get_session_record(
        self,
        request: GetSessionRecordRequest,
        ctx: RequestContext[GetSessionRecordRequest, SessionRecordEntry],
    ) -> AsyncIterator[SessionRecordEntry]:
        return _session_record(self._daemon.service(SessionRecord), request)


async def _session_record(
    record: SessionRecord, request: GetSessionRecordRequest
) -> AsyncIterator[SessionRecordEntry]:
    """The record's entries, read a batch at a time off the event loop."""
    if not record.enabled:
        raise ConnectError(
            Code.FAILED_PRECONDITION,
            "the daemon keeps no session record: serve it with --record or --record-folder",
        )
    await asyncio.to_thread(record.flush)
    entries = record.read(request.agent_id, request.since)
    while batch := await asyncio.to_thread(record.read_batch, entries, RECORD_BATCH):
        for entry, line in batch:
            yield SessionRecordEntry(
                seq=entry.get("seq", 0),
                time_unix_ns=entry.get("t", 0),
                agent_id=entry.get("agent", ""),
                parent_agent_id=entry.get("parent", ""),
                kind=entry.get("kind", ""),
                json=line,
            )


def _artifact(info: artifacts.ArtifactInfo) -> Artifact:
    return Artifact(
        path=info.path,
        size_bytes=info.size,
        mime_type=info.mime_type,
        modified_ms=info.modified_ms,
        uploaded=info.uploaded,
    )


async def _connect_errors(
    stream: AsyncGenerator[AgentContextChange, None],
) -> AsyncIterator[AgentContextChange]:
    """The stream, its CodedError answered as the RPC's Connect error."""
    try:
        async for item in stream:
            yield item
    except CodedError as failure:
        raise _connect_error(failure) from None
    finally:
        await stream.aclose()


async def _single_call(request: ExecRequest) -> AsyncIterator[ExecStreamElement]:
    yield ExecStreamElement(
        exec_client_message=ExecClientMessage(
            id=0, tool_call=request.tool_call, agent_id=request.agent_id, run_mode=request.run_mode
        )
    )
