// The MCP servers the daemon runs.
import type { ExecDaemon } from "./client.js";
import type { McpServerInfo } from "./gen/agent/v1/context_pb.js";

export class Mcp {
  constructor(private readonly daemon: ExecDaemon) {}

  /** Every configured MCP server: its name, state, error and tools (ListMcpTools). */
  async tools(): Promise<McpServerInfo[]> {
    return (await this.daemon.unary((c, rpc) => c.listMcpTools({}, rpc))).servers;
  }
}
