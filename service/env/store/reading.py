"""What the agent's messages at the store desk say: amounts, refund timelines and refusal reasons.

The reply reader (:func:`service.env.replies.meaning`) reads the ticket tasks' reasons on meaning; the
store desk reads its own facts with the same machinery (:mod:`service.env.language`: lemmas on whole
tokens, clauses, negation scoped to what it negates), so that a fact is told in any words and a fact
negated ("it hasn't shipped yet") tells nothing:

- :func:`stated_amounts`: the money amounts a text states, in cents ("$86.70", "86.70 dollars",
  "USD 86.70");
- :func:`stated_timelines`: the business-day ranges it states ("5-10 business days", "five to ten
  working days", "within 10 business days");
- :func:`stated_reasons`: the refusal reasons of :data:`service.env.store.policy.STORE_REASONS` it
  asserts.
"""

from __future__ import annotations

import re
from functools import lru_cache

from service.env.replies import meaning

_USD = re.compile(r"\b(?:usd|us\$)\s?(\d[\d,]*(?:\.\d{1,2})?)\b", re.I)


@lru_cache(maxsize=8192)
def stated_amounts(text: str) -> frozenset[int]:
    """The money amounts ``text`` states, in cents."""
    amounts = {round(a * 100) for a in meaning(text).amounts}
    amounts |= {round(float(m.group(1).replace(",", "")) * 100) for m in _USD.finditer(text)}
    return frozenset(amounts)
