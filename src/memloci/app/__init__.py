"""The application around the service: the config file, library specs and the registry, projects."""
