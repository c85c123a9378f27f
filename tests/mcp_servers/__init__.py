"""Small real MCP servers (built on the `mcp` SDK's MCPServer, formerly FastMCP) for tests."""
