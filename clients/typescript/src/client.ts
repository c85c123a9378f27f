// The client: `connect(url, { token })`, then `shell`, `files`, `git`, `mcp`, `context` and
// `call` for any tool.
// Every RPC goes through `unary` or `exec` below, which attach the token and type the errors.
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { createClient, type Client, type Transport } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";

import { ControlService, type PingResponse } from "./gen/agent/v1/control_pb.js";
import type { RunMode } from "./gen/agent/v1/common_pb.js";
import type { GetAgentContextResponse } from "./gen/agent/v1/context_pb.js";
import type { ExecServerMessage } from "./gen/agent/v1/exec_pb.js";
import { ToolCallSchema, type ToolCall, type ToolCallDelta } from "./gen/agent/v1/tool_call_pb.js";
import { Unauthenticated, Unavailable, fromConnect, fromExecError } from "./errors.js";
import { Files } from "./files.js";
import { Git } from "./git.js";
import { Mcp } from "./mcp.js";
import { Shell } from "./shell.js";

/** A ToolCall to send: `{ tool: { case: "readToolCall", value: { args: { path } } } }`. */
export type ToolCallInit = MessageInitShape<typeof ToolCallSchema>;

export interface ConnectOptions {
  /** The daemon's token. Default: EXEC_DAEMON_AUTH_TOKEN, else `.exec-daemon-token` in the
   * current directory or a parent (Node only; what `./scripts/serve` writes). */
  token?: string;
  /** A Connect transport of your own (e.g. `@connectrpc/connect-node`'s, for HTTP/2). Default:
   * the Connect protocol over `fetch`, which works in browsers and in Node. */
  transport?: Transport;
  /** The conversation the calls belong to (shell sessions and todos are per agent). */
  agentId?: string;
}

export interface CallOptions {
  /** Aborts the call (the daemon stops it). */
  signal?: AbortSignal;
  /** Sees each delta while the call runs (a shell's output, an edit's progress). */
  onDelta?: (delta: ToolCallDelta) => void;
  /** Overrides the daemon's --run-mode for this call (e.g. after a person approved it). */
  runMode?: RunMode;
}

/** @internal */
export interface RpcOptions {
  headers: Headers;
}

/** A connected daemon. Create it with `connect()`. */
export class ExecDaemon {
  readonly url: string;
  readonly shell: Shell;
  readonly files: Files;
  readonly git: Git;
  readonly mcp: Mcp;
  private readonly control: Client<typeof ControlService>;
  private readonly token: Promise<string>;
  private readonly agentId: string;

  constructor(url: string, options: ConnectOptions = {}) {
    this.url = url.replace(/\/+$/, "");
    const transport = options.transport ?? createConnectTransport({ baseUrl: this.url });
    this.control = createClient(ControlService, transport);
    this.token = options.token !== undefined ? Promise.resolve(options.token) : tokenFromEnvironment();
    this.token.catch(() => undefined); // reported by the first call, not as an unhandled rejection
    this.agentId = options.agentId ?? "";
    this.shell = new Shell(this);
    this.files = new Files(this);
    this.git = new Git(this);
    this.mcp = new Mcp(this);
  }

  /** The daemon's version, pid and workspace. */
  async ping(): Promise<PingResponse> {
    return this.unary((control, rpc) => control.ping({}, rpc));
  }

  /** The agent's rules, skills and subagent definitions for `paths` (GetAgentContext); with an
   * agent id (default: the one given to `connect`), that agent's mode and reflections too. */
  async context(paths: string[] = [], { agentId = this.agentId } = {}): Promise<GetAgentContextResponse> {
    return this.unary((control, rpc) => control.getAgentContext({ paths, agentId }, rpc));
  }

  /** Runs any tool call and returns the daemon's answer: the same ToolCall with `result` set.
   * Tool outcomes (rejected, not found, ...) are in the result; the call throws only when the
   * daemon could not run it. */
  async call(toolCall: ToolCallInit, options: CallOptions = {}): Promise<ToolCall> {
    let answer: ToolCall | undefined;
    for await (const message of this.exec(toolCall, options)) {
      if (message.message.case === "toolCallDelta") options.onDelta?.(message.message.value);
      else if (message.message.case === "toolCallResult") answer = message.message.value;
    }
    if (answer === undefined) {
      throw new Unavailable("the daemon ended the call before it answered", "unavailable");
    }
    return answer;
  }

  /** @internal One ControlService unary RPC, with the token. */
  async unary<M>(call: (client: Client<typeof ControlService>, options: RpcOptions) => Promise<M>): Promise<M> {
    const options = { headers: await this.headers() };
    try {
      return await call(this.control, options);
    } catch (error) {
      throw fromConnect(error);
    }
  }

  /** @internal The messages of one ControlService.Exec call, with the token; an ExecError
   * becomes a typed error. */
  async *exec(toolCall: ToolCallInit, options: CallOptions = {}): AsyncGenerator<ExecServerMessage> {
    const headers = await this.headers();
    const request = {
      toolCall: create(ToolCallSchema, toolCall),
      agentId: this.agentId,
      runMode: options.runMode,
    };
    try {
      for await (const message of this.control.exec(request, { headers, signal: options.signal })) {
        if (message.message.case === "error") {
          throw fromExecError(message.message.value.code, message.message.value.message);
        }
        if (message.message.case !== "heartbeat") yield message;
      }
    } catch (error) {
      throw fromConnect(error);
    }
  }

  private async headers(): Promise<Headers> {
    return new Headers({ authorization: `Bearer ${await this.token}` });
  }
}

/** Connects to a daemon (no request is sent until the first call). */
export function connect(url: string, options: ConnectOptions = {}): ExecDaemon {
  return new ExecDaemon(url, options);
}

interface NodeProcess {
  env: Record<string, string | undefined>;
  cwd(): string;
}

async function tokenFromEnvironment(): Promise<string> {
  const process = (globalThis as { process?: NodeProcess }).process;
  const fromEnv = process?.env.EXEC_DAEMON_AUTH_TOKEN;
  if (fromEnv) return fromEnv;
  if (process !== undefined && typeof process.cwd === "function") {
    // A variable specifier: bundlers for the browser leave it alone, and it never runs there.
    const fsName = "node:fs/promises";
    const fs = (await import(fsName)) as { readFile(path: string, encoding: "utf8"): Promise<string> };
    let dir = process.cwd();
    for (;;) {
      try {
        const token = (await fs.readFile(`${dir}/.exec-daemon-token`, "utf8")).trim();
        if (token) return token;
      } catch {
        // not here: try the parent
      }
      const parent = dir.replace(/\/[^/]*$/, "");
      if (parent === dir || parent === "") break;
      dir = parent;
    }
  }
  throw new Unauthenticated(
    "no token: pass connect(url, { token }), or set EXEC_DAEMON_AUTH_TOKEN",
    "unauthenticated",
  );
}
