"""``reset`` and ``step``: the environment as two pure functions over :class:`EpisodeState`."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from service.env import customer
from service.env.dataset import PUBLIC, Dataset
from service.env.errors import EnvError, EpisodeFinished, UnknownTask
from service.env.grading import grade_episode
from service.env.models import Act, Action, EpisodeState, HistoryEntry, Observation, StepResult, cut_off, view
from service.env.policy import render_policy_markdown
from service.env.store import episode as store_episode
from service.env.tasks import get_task
from service.env.toolbox import legacy_action
from service.env.world import DEFAULT_SPLIT, SPLITS, Ticket, per_ticket

__all__ = ["EnvError", "EpisodeFinished", "UnknownTask", "observe", "public_state", "replay", "reset", "step"]


def reset(
    task_id: str, seed: int, split: str = DEFAULT_SPLIT, dataset: Dataset = PUBLIC
) -> tuple[EpisodeState, Observation]:
    """Start an episode of ``task_id`` on the ticket that ``seed`` picks from the task's pool in ``split``.

    Seeds ``0 .. n-1`` enumerate the ``n`` tickets of the pool (in a keyed order that says nothing
    about their labels); larger seeds wrap around. The test split needs a ``dataset`` that holds
    the deployment's test key.
    """
    task = get_task(task_id)
    if split not in SPLITS:
        raise EnvError(f"unknown split {split!r}; choose one of: {', '.join(SPLITS)}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise EnvError("seed must be a non-negative integer")
    pool = dataset.pool(split, task.family, task.difficulty)
    if task.store_desk:
        conversation = dataset.store_ticket(pool[seed % len(pool)])
        state = EpisodeState(
            task_id=task.id,
            split=split,
            seed=seed,
            ticket_id=conversation.ticket_id,
            max_steps=task.max_steps,
            history=(HistoryEntry(role="customer", text=conversation.message),),
            store=store_episode.new_progress(),
        )
        return state, observe(state, dataset=dataset)
    ticket = dataset.ticket(pool[seed % len(pool)])
    state = EpisodeState(
        task_id=task.id,
        split=split,
        seed=seed,
        ticket_id=ticket.ticket_id,
        max_steps=task.max_steps,
        history=(HistoryEntry(role="customer", text=ticket.message),),
    )
    return state, observe(state, dataset=dataset)


def step(state: EpisodeState, action: Action, dataset: Dataset = PUBLIC) -> StepResult:
    """Apply ``action`` to ``state``. Parts apply in the order lookup, reassign_queue, add_tag,
    reply, decision, close_ticket (so a request_info's question is the reply of the same step)."""
    if state.done:
        raise EpisodeFinished("this episode is finished; call reset to start a new one")
    task = get_task(state.task_id)
    if task.store_desk:
        return _store_step(state, action, dataset)
    if action.tool is not None:
        action = legacy_action(task.id, action)
    ticket = dataset.ticket(state.ticket_id)
    draft = _Draft.of(state)
    _apply_parts(draft, action, ticket)
    if action.decision:
        _decide(draft, action, ticket, task.ends_on_decision)
    if action.close_ticket:
        draft.act("close", "closed")
        draft.status, draft.done = "closed", True
    return _result(state, draft, ticket, dataset)


@dataclass
class _Draft:
    """What one step changes, as it applies the action's parts in order."""

    step: int
    queue: str
    tags: list[str]
    status: str
    history: list[HistoryEntry]
    revealed: list[str]
    acts: list[Act] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    tool_result: dict[str, Any] | str | None = None
    done: bool = False

    @classmethod
    def of(cls, state: EpisodeState) -> _Draft:
        return cls(
            state.step_count, state.queue, list(state.tags), state.status, list(state.history), list(state.revealed)
        )

    def act(self, kind: Any, value: str) -> None:
        self.acts.append(Act(step=self.step, kind=kind, value=value))


def _apply_parts(draft: _Draft, action: Action, ticket: Ticket) -> None:
    """The parts before the decision: lookup, reassign_queue, add_tag, reply."""
    if action.lookup:
        draft.act("lookup", action.lookup)
        draft.tool_result = _lookup(ticket, action.lookup)
    if action.reassign_queue:
        draft.act("queue", action.reassign_queue)
        if action.reassign_queue == draft.queue:
            draft.notes.append(f"the ticket is already in {draft.queue}")
        draft.queue = action.reassign_queue
        draft.history.append(HistoryEntry(role="system", text=f"Ticket moved to {draft.queue}."))
    if action.add_tag:
        draft.act("tag", action.add_tag)
        if action.add_tag in draft.tags:
            draft.notes.append(f"tag {action.add_tag} was already on the ticket")
        else:
            draft.tags.append(action.add_tag)
    if action.reply:
        draft.act("reply", action.reply)
        draft.history.append(HistoryEntry(role="agent", text=action.reply))


def _decide(draft: _Draft, action: Action, ticket: Ticket, ends_episode: bool) -> None:
    """The decision: request_info asks the customer (the reply is the question); any other decision
    ends the episode of a task that ends on its decision."""
    assert action.decision is not None
    draft.act("decision", action.decision)
    draft.history.append(HistoryEntry(role="system", text=f"Decision recorded: {action.decision}."))
    if action.decision != "request_info":
        draft.done = draft.done or ends_episode
        return
    if not action.reply:
        draft.notes.append("request_info without a question in `reply`: the customer does not know what you need")
    rounds = sum(1 for e in draft.history if e.role == "customer")
    answer, topics = customer.answer(ticket, action.reply, rounds)
    draft.history.append(HistoryEntry(role="customer", text=answer))
    for topic in sorted(topics - set(draft.revealed)):  # what the customer stated counts, whatever was asked
        draft.revealed.append(topic)
        draft.act("revealed", topic)


def _result(state: EpisodeState, draft: _Draft, ticket: Ticket, dataset: Dataset) -> StepResult:
    """The new state, its grade, the step's reward and the observation."""
    step_count = draft.step + 1
    truncated = cut_off(state, step_count, draft.done)
    new_state = state.model_copy(
        update={
            "step_count": step_count,
            "queue": draft.queue,
            "tags": tuple(draft.tags),
            "status": draft.status,
            "history": tuple(draft.history),
            "revealed": tuple(draft.revealed),
            "acts": state.acts + tuple(draft.acts),
            "tool_result": draft.tool_result,
            "last_action_error": "; ".join(draft.notes) or None,
            "done": draft.done or truncated,
            "truncated": truncated,
        }
    )
    grade = grade_episode(new_state, dataset)  # rewards are not graded: this is the grade of the final state too
    # The change in the raw score, kept inside the declared reward range [-1, 1]: a step that would move it
    # further (several penalties at once) pays the rest over the next steps, so the rewards still add
    # up to the raw score whenever the episode goes on long enough to carry it.
    reward = round(max(-1.0, min(1.0, grade.raw - _raw_so_far(state))), 6)
    new_state = new_state.model_copy(update={"rewards": state.rewards + (reward,)})
    observation = observe(new_state, reward, ticket=ticket)
    if new_state.done:
        observation = observation.model_copy(update={"score": grade.score, "resolved": grade.resolved})
    return StepResult(state=new_state, observation=observation, reward=reward, done=new_state.done, grade=grade)


def _store_step(state: EpisodeState, action: Action, dataset: Dataset) -> StepResult:
    conversation = dataset.store_ticket(state.ticket_id)
    new_state, _ = store_episode.step(state, action, conversation)
    grade = grade_episode(new_state, dataset)
    reward = round(max(-1.0, min(1.0, grade.raw - _raw_so_far(state))), 6)
    new_state = new_state.model_copy(update={"rewards": state.rewards + (reward,)})
    observation = store_episode.observe(new_state, conversation, get_task(state.task_id).instructions, reward)
    if new_state.done:
        observation = observation.model_copy(update={"score": grade.score, "resolved": grade.resolved})
    return StepResult(state=new_state, observation=observation, reward=reward, done=new_state.done, grade=grade)


def replay(task_id: str, seed: int, split: str, actions: list[Action], dataset: Dataset = PUBLIC) -> EpisodeState:
    """The state reached by playing ``actions`` from ``reset(task_id, seed, split)``.

    How stored episodes are re-graded and checked: the state is a function of the actions.
    """
    state, _ = reset(task_id, seed, split, dataset)
    for action in actions:
        state = step(state, action, dataset).state
    return state


def _raw_so_far(state: EpisodeState) -> float:
    # The rewards so far: the raw score of the prefix, less any change still carried (see ``step``).
    return round(sum(state.rewards), 6)


def observe(
    state: EpisodeState, reward: float | None = None, dataset: Dataset = PUBLIC, ticket: Ticket | None = None
) -> Observation:
    """The agent's view of ``state``: never gold labels, clause decisions or unrevealed facts."""
    task = get_task(state.task_id)
    if task.store_desk:
        return store_episode.observe(state, dataset.store_ticket(state.ticket_id), task.instructions, reward)
    ticket = ticket if ticket is not None else dataset.ticket(state.ticket_id)
    return view(
        state,
        ticket_id=ticket.ticket_id,
        ticket=_ticket_text(ticket),
        customer_message=ticket.message,
        instructions=task.instructions,
        reward=reward,
    )


def public_state(state: EpisodeState) -> dict[str, Any]:
    """A leak-free summary of the episode for ``GET /state``."""
    store = {}
    if state.store is not None:
        store = {"tool_calls": len(state.store.calls), "changes": len(state.store.effects)}
    return {
        **store,
        "step_count": state.step_count,
        "task_id": state.task_id,
        "split": state.split,
        "seed": state.seed,
        "ticket_id": state.ticket_id,
        "status": state.status,
        "queue": state.queue,
        "tags": list(state.tags),
        "max_steps": state.max_steps,
        "done": state.done,
        "truncated": state.truncated,
    }


def ticket_text(t: Ticket) -> str:
    """Seed A's plain-text ticket: a header of what the helpdesk shows, then the message.

    Easy and medium tickets say how many days ago the parcel was delivered; hard ones give only the
    dates (order, delivery, ticket opened), so the agent counts the days itself (P12)."""
    o = t.order
    items = [
        f"{line.product.name} ({line.product.category})"
        + (
            f" {line.quantity} × ${line.product.price:.2f}"
            if line.quantity > 1
            else f" ${line.product.price:.2f}"
            if len(o.lines) > 1
            else ""
        )
        for line in o.lines
    ]
    what = items[0] if len(items) == 1 else f"{len(items)} items: " + ", ".join(items)
    if t.presentation == "days":
        delivered = (
            f"delivered {o.days_since_delivery} day{'s' if o.days_since_delivery != 1 else ''} ago"
            if o.days_since_delivery is not None
            else f"not delivered (ordered on {o.order_date})"
        )
        order_line = f"Order {o.order_id} · {what} · total ${o.amount:.2f} · {delivered}"
    else:
        delivered = f"delivered {o.delivery_date}" if o.delivery_date else "not delivered"
        order_line = f"Order {o.order_id} placed {o.order_date} · {delivered} · {what} · total ${o.amount:.2f}"
    return (
        f"Ticket {t.ticket_id}: {t.subject}\n"
        f"{order_line}\n"
        f"Images provided: {'true' if t.claim.images_provided else 'false'} · "
        f"Past returns: {t.customer.returns_12m} · Tier: {t.customer.tier}\n"
        f"Opened on {t.opened_on}\n\n{t.message}"
    )


# every observation of an episode shows the ticket: its text once per ticket object
_ticket_text = per_ticket(ticket_text)


@lru_cache(maxsize=1)
def _policy_document() -> str:
    return render_policy_markdown()


def _lookup(t: Ticket, target: str) -> dict[str, Any] | str:
    return _policy_document() if target == "policy" else lookup_record(t, target)


def lookup_record(t: Ticket, target: str) -> dict[str, Any]:
    """What ``lookup: order`` / ``lookup: customer`` returns for a ticket (hard tickets' order records
    carry dates only, no day count)."""
    if target == "order":
        o = t.order
        record: dict[str, Any] = {
            "order_id": o.order_id,
            "order_date": o.order_date,
            "delivery_date": o.delivery_date,
        }
        if t.presentation == "days":
            record["days_since_delivery"] = o.days_since_delivery
        record.update(
            {
                "items": [
                    {
                        "sku": line.product.sku,
                        "name": line.product.name,
                        "category": line.product.category,
                        "unit_price": line.product.price,
                        "quantity": line.quantity,
                        "amount": line.amount,
                        "in_stock": line.product.in_stock,
                        "final_sale": line.product.final_sale,
                        "hygiene": line.product.hygiene,
                        "perishable": line.product.perishable,
                        "warranty_days": line.product.warranty_days,
                    }
                    for line in o.lines
                ],
                "total": o.amount,
                "carrier": {"status": o.carrier_status, "days_past_estimate": o.days_past_estimate},
                "payment": {"method": o.payment_method, "charges": o.charges},
            }
        )
        return record
    c = t.customer
    return {
        "customer_id": c.customer_id,
        "name": c.name,
        "tier": c.tier,
        "account_age_days": c.account_age_days,
        "orders_12m": c.orders_12m,
        "returns_12m": c.returns_12m,
        "chargebacks": c.chargebacks,
        "account_flags": ["fraud_review"] if c.fraud_flag else [],
    }
