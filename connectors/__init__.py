"""Built-in connectors: one module per service, each importing only the connector SDK (`collector.sdk`).
They are registered in pyproject.toml under the `likeastore.connectors` entry-point group, exactly as a
third-party package registers its own; see docs/connectors/tutorial.md."""
