"""The MCP surface: tool adapters over the service, grouped by area."""
