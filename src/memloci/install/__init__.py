"""`memloci install` / `uninstall`: put memloci into an MCP client's config file (and its hooks),
and take exactly that back out."""
