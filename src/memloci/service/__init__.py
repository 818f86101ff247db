"""Every operation, once: the one facade that tools, the CLI, hooks and the HTTP API call."""
