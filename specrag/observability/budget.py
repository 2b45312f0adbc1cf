"""Spending limits per session (per user, when users sign in) and per day, checked
before each question.

``Budget(settings, ledger).check(session, policy, user="")`` compares what the ledger
says was spent (by this user across all their sessions when ``user`` is given, which the
service does with a users file, so a new browser session or API key buys no new
allowance; else by this session; today, UTC, everyone) with ``budget.session_usd`` /
``budget.day_usd`` (0: no limit). Over a limit it either degrades the question to
``draft-only`` (the local draft tier answers; the paid heavy tier is not called) or,
with ``on_exceeded: refuse``, raises ``BudgetExceeded`` with a message for the user.
A question that starts under the limit may end a little over it: the check is
before, not during, generation (an answer is never cut off half-way).

Deliberately not here: counting (``ledger``), who the user is (``pipeline.service``
passes the signed-in user's name).
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

    def status(self, session: str, user: str = "") -> dict:
        """``session_spent_usd`` is the user's spending when ``user`` is given."""
        b = self.limits
        spent = self.ledger.spent(user=user) if user else self.ledger.spent(session=session)
        return {"session": session, "user": user or None, "session_spent_usd": spent,
                "session_limit_usd": b.session_usd or None,
                "day": self.today(), "day_spent_usd": self.ledger.spent(day=self.today()),
                "day_limit_usd": b.day_usd or None}

    def check(self, session: str, policy: str | None, user: str = "") -> BudgetDecision:
        b = self.limits
        if not (b.session_usd or b.day_usd):
            return BudgetDecision(policy)
        s = self.status(session, user)
        reason = ""
        if b.session_usd and s["session_spent_usd"] >= b.session_usd:
            spent = f"${s['session_spent_usd']:.4f}"
            reason = (f"{user} has used {spent} of the ${b.session_usd:.2f} budget per user"
                      if user else
                      f"this session has used {spent} of its ${b.session_usd:.2f} budget")
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
