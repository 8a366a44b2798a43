"""Other memory servers' tool sets over this vault (``serve --compat NAME``): one module
per server, its tools as plain functions and a table of them, as ``server/tools.py``.

- ``knowledge_graph``: the MCP reference memory server (``@modelcontextprotocol/server-memory``)
- ``memory_mcp``: memory-mcp (ids are hashes of text and tags)
- ``memory_vault``: mcp-memory-vault; ``agentmemory``: AgentMemory
- ``numbers``: the integer ids those two give memories, kept in the index folder
"""
