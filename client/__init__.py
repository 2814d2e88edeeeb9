"""The evaluation client: plays an agent against an ecomm-support-env service over its wire
protocol (HTTP), and nothing else — it never opens the service's database or imports its app.

One module per concern::

    config      Config: every environment variable, read once
    wire        EnvClient: the service's HTTP API (reset, step, grader, runs), ServiceError
    llm         LLMClient: OpenAI-compatible chat completions with bounded retries
    prompt      the prompts of both modes (native tool calls, JSON in text), the tool answers without
                the grade, and the tolerant JSON action parser
    agents      the agents a runner can play: the LLM agents (tool-calling, JSON) and the reference ones
    runner      play_episode and run_workers: episodes from a source, played concurrently
    logformat   the [START]/[STEP]/[END] stdout lines
    evaluation  Plan and evaluate(plan): the whole evaluation, as a typed function
    local       a local service on a temporary database, when no service answers
    cli         ``python inference.py``
    baseline    ``python baseline.py``: reference scores from the server's own run summaries
    trl         TicketDesk / StoreDesk: the environment for TRL's GRPOTrainer(environment_factory=...)

``from client import Plan, evaluate`` is the API that ``baseline.py`` and the tests call.
"""

from client.config import Config
from client.evaluation import Evaluation, Plan, evaluate

__all__ = ["Config", "Evaluation", "Plan", "evaluate"]
