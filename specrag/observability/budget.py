"""Spending limits per session and per day, checked before each question.

``Budget(settings, ledger).check(session, policy)`` compares what the ledger says was
spent (this session; today, UTC, all sessions) with ``budget.session_usd`` /
``budget.day_usd`` (0: no limit). Over a limit it either degrades the question to
``draft-only`` (the local draft tier answers; the paid heavy tier is not called) or,
with ``on_exceeded: refuse``, raises ``BudgetExceeded`` with a message for the user.
A question that starts under the limit may end a little over it: the check is
before, not during, generation (an answer is never cut off half-way).

Deliberately not here: counting (``ledger``), per-user identity (the app passes a
session id).
"""

from __future__ import annotations

from dataclasses import dataclass

from specrag.observability.ledger import Ledger, utc_day
from specrag.types import SpecragError

ACTIONS = ("draft-only", "refuse")


class BudgetExceeded(SpecragError):
    pass


@dataclass(frozen=True)
class BudgetDecision:
    policy: str | None  # the policy to use (None: the caller's)
    degraded: bool = False
    reason: str = ""


class Budget:
    def __init__(self, settings, ledger: Ledger, today=utc_day):
        if settings.budget.on_exceeded not in ACTIONS:
            raise ValueError(f"budget.on_exceeded must be one of {ACTIONS}, "
                             f"got '{settings.budget.on_exceeded}'")
        self.limits = settings.budget
        self.ledger = ledger
        self.today = today

    def status(self, session: str) -> dict:
        b = self.limits
        return {"session": session, "session_spent_usd": self.ledger.spent(session=session),
                "session_limit_usd": b.session_usd or None,
                "day": self.today(), "day_spent_usd": self.ledger.spent(day=self.today()),
                "day_limit_usd": b.day_usd or None}

    def check(self, session: str, policy: str | None) -> BudgetDecision:
        b = self.limits
        if not (b.session_usd or b.day_usd):
            return BudgetDecision(policy)
        s = self.status(session)
        reason = ""
        if b.session_usd and s["session_spent_usd"] >= b.session_usd:
            reason = (f"this session has used ${s['session_spent_usd']:.4f} of its "
                      f"${b.session_usd:.2f} budget")
        elif b.day_usd and s["day_spent_usd"] >= b.day_usd:
            reason = (f"today's spending (${s['day_spent_usd']:.4f}) has reached the "
                      f"${b.day_usd:.2f} daily budget")
        if not reason:
            return BudgetDecision(policy)
        if b.on_exceeded == "refuse":
            raise BudgetExceeded(f"{reason}; no more questions can be answered until it is "
                                 "raised or the period ends")
        return BudgetDecision("draft-only", True,
                              f"{reason}; answering with the draft model only")
