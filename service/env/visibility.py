"""What an agent may learn about its own episode, and when: the rules that keep scores honest.

- Plain episodes (train/dev, no run): dense step rewards, and the score when the episode ends —
  what RL training needs.
- Episodes of a run (an evaluation), while the run is in progress: nothing per episode — step
  rewards go out as 0.0, and no final score, grade, breakdown, state beyond progress or episode
  page. Trials are played trial-major, so an adaptive agent would otherwise carry trial 0's verdict
  into its later trials; on the test split it cannot, so a dev run plays exactly like a test run.
  Once a dev run completes, its episodes open up (dev labels are public anyway).
- The test split: nothing per episode, ever — not its rewards, score, grade, actions or trajectory,
  not even after the run completes, not even to the run's owner. Only the run's aggregates are
  published (see :mod:`service.stats`): every per-ticket answer would be a label oracle.
"""

from __future__ import annotations

from dataclasses import dataclass

from service.env.dataset import HIDDEN_SPLIT


@dataclass(frozen=True)
class Feedback:
    step_rewards: bool  # real step rewards on the wire (else 0.0)
    episode_score: bool  # the finished episode's score and resolved flag (final observation, /grader)
    episode_details: bool  # grade breakdown, actions, observations, trajectory and full state of the episode


def feedback(split: str, in_run: bool, run_complete: bool) -> Feedback:
    """The feedback an episode of ``split`` gets, inside a run (complete or not) or not."""
    if split == HIDDEN_SPLIT:
        return Feedback(step_rewards=False, episode_score=False, episode_details=False)
    if in_run and not run_complete:
        return Feedback(step_rewards=False, episode_score=False, episode_details=False)
    return Feedback(step_rewards=True, episode_score=True, episode_details=True)
