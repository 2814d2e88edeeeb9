"""Money at the store desk: integer cents, the rounding rule, and what a line was paid (P18).

Every amount the policy computes is rounded to the cent, halves up, at each step the policy names —
the same arithmetic the policy document spells out, so an agent can do it by hand.
"""

from __future__ import annotations

from fractions import Fraction

from service.env.store.world import Order


def round_half_up(value: Fraction) -> int:
    """``value`` (in cents) to the nearest cent, halves up (amounts are never negative here)."""
    whole, rest = divmod(value.numerator, value.denominator)
    return whole + (1 if 2 * rest >= value.denominator else 0)


def dollars(cents: int) -> float:
    return round(cents / 100, 2)


def money(cents: int) -> str:
    """``3717`` → ``"$37.17"``."""
    return f"${cents / 100:,.2f}"


def to_cents(amount: float) -> int | None:
    """A dollar amount from a tool call in cents, or None when it is not a whole number of cents."""
    cents = round(amount * 100)
    return cents if abs(amount * 100 - cents) < 1e-6 else None


def discount_shares(order: Order) -> dict[int, int]:
    """Each line's share of the order discount (P18): the discount times the line's subtotal over the
    goods subtotal, rounded to the cent; the last line takes what is left, so the shares add up."""
    if not order.discount:
        return {line.line_no: 0 for line in order.lines}
    shares: dict[int, int] = {}
    goods = order.goods
    for line in order.lines[:-1]:
        shares[line.line_no] = round_half_up(Fraction(order.discount * line.subtotal, goods))
    last = order.lines[-1].line_no
    shares[last] = order.discount - sum(shares.values())
    return shares


def line_paid(order: Order, line_no: int) -> int:
    """What the whole line was paid: its subtotal less its share of the discount."""
    line = order.line(line_no)
    assert line is not None
    return line.subtotal - discount_shares(order)[line_no]


def paid_for(order: Order, line_no: int, quantity: int) -> int:
    """What ``quantity`` units of a line were paid: the line's paid value times quantity over the
    line's quantity, rounded to the cent (the whole line when all of it)."""
    line = order.line(line_no)
    assert line is not None
    paid = line_paid(order, line_no)
    if quantity == line.quantity:
        return paid
    return round_half_up(Fraction(paid * quantity, line.quantity))


def percent_of(cents: int, percent: int) -> int:
    """``percent`` % of ``cents``, rounded to the cent, halves up."""
    return round_half_up(Fraction(cents * percent, 100))
