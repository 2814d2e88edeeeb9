"""The store desk's cheap strategies for the gaming suite: :mod:`bench.store_gaming_agents`' (which
``bench.gaming`` also plays), and one built on the test-only observable oracle — acting without verifying
identity — which stays with the tests."""

from __future__ import annotations

import re
from collections.abc import Callable

from bench.store_gaming_agents import STRATEGIES as CHEAP
from service.env.models import Observation
from tests.env.store_oracles import ObservableOracle


class NoVerification(ObservableOracle):
    """The observable oracle, skipping identity: it takes the writer for the account holder, reads the
    account by the order id the message gives and acts."""

    def _start(self, obs: Observation) -> None:
        self.obs0 = obs
        self.holder, self.gave_identity = True, False
        self._ask_identity()

    def _ask_identity(self) -> None:
        self.identity_asks += 1
        self.email, self.postal, self.phase = "", "", "verify"
        order = next(iter(sorted(set(re.findall(r"ORD-\d{5}", self.obs0.customer_message.upper())))), None)
        self.queue.append(("find_customer", {"order_id": order} if order else {"email": "unknown@example.com"}))

    def _verify(self, obs: Observation) -> None:
        result = obs.tool_result or {}
        if result.get("tool") == "find_customer" and result.get("ok"):
            self.customer_id = result["result"]["customer_id"]
            self.verified = True
            self.phase = "orders"
            self.queue.append(("get_customer", {"customer_id": self.customer_id}))
            return
        self.phase = "end"
        self.queue.append(("send_message", {"text": "I could not find your account."}))


STRATEGIES: dict[str, Callable[[], object]] = {**CHEAP, "acts without verifying identity": NoVerification}
