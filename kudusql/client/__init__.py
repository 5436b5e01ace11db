"""The Python client API, modelled on Kudu's Python client (placeholder: being built)."""
