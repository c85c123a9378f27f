// @exec-daemon/client: a TypeScript client for exec-daemon, in Node and in browsers.
//
//   const daemon = connect("http://127.0.0.1:8080", { token });
//   const { exitCode, stdout } = await daemon.shell.run("ls");
//   await daemon.files.edit("README.md", "old", "new");
//   console.log(await daemon.git.diff());
export { connect, ExecDaemon, type CallOptions, type ConnectOptions, type ToolCallInit } from "./client.js";
export {
  Aborted,
  ExecDaemonError,
  InvalidArgument,
  NeedsApproval,
  NotFound,
  PermissionDenied,
  Timeout,
  ToolFailed,
  Unauthenticated,
  Unavailable,
} from "./errors.js";
export type { EditResult, Entry, Files, GrepMatch, GrepOptions, GrepResult } from "./files.js";
export type { Git } from "./git.js";
export type { Mcp } from "./mcp.js";
export { resultOf } from "./outcome.js";
export type { CommandHandle, CommandResult, RunOptions, Shell, Spill } from "./shell.js";
export { RunMode } from "./gen/agent/v1/common_pb.js";
export type { ToolCall, ToolCallDelta } from "./gen/agent/v1/tool_call_pb.js";
export type { GetAgentContextResponse, McpServerInfo } from "./gen/agent/v1/context_pb.js";
