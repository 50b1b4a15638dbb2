"""{{ cookiecutter.project_name }}.

A stdio MCP server built on the vendored ``mrtr_runtime`` package; see README.md.
"""

__version__ = "0.1.0"
