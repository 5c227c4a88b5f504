"""Development tools: the fake GitHub API, `collector demo` and `collector bench`. Imported only by their
subcommands and by tests, never by the daemon (which must not load mongomock or multiprocessing)."""
