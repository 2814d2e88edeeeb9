"""HTTP, WebSocket and MCP surfaces over the core (``service.env``) and persistence (``service.db``)."""
