"""The service's domains, each as litestar-fullstack groups them: ``controllers`` (thin routes),
``services`` (what the routes call), ``schemas`` (request and response models).

- ``episodes``: the OpenEnv surface — reset, step, state, schema over HTTP, WebSocket and MCP.
- ``runs``: server-side runs, the leaderboard and their pages.
- ``benchmark``: the task catalogue, the grader and the server-side baseline.
"""
