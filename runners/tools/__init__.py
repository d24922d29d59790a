"""Tools agents call outside LangHost: MCP servers (`mcp`)."""
