"""What a study that extends another (`[compare] extends`) must share with it.

`check_against(study, other, where)`: `study` adds arms to `other` without
rerunning it, so it runs exactly `other`'s settings, adds only new arms,
and names as comparators only arms of the two studies.
"""

from tuning.study_keys import StudyError


def check_against(study, other, where):
    """Checks `study`, which extends `other` (both loaded `Study`s).

    Raises:
        StudyError: one line naming what `study` does not share with
            `other`.
    """
    parent = other.name
    if other.extends is not None:
        raise StudyError(
            f"{where}: `extends` must name a study that extends none. "
            f"Received: extends={parent!r}, which extends {other.extends!r}"
        )
    shared = sorted(set(study.arms) & set(other.arms))
    if shared:
        raise StudyError(
            f"{where}: the arms added to {parent!r} must be new to it. "
            f"Received: arms={shared}"
        )
    unknown = [
        arm
        for arm in study.comparators
        if arm not in study.arms and arm not in other.arms
    ]
    if unknown:
        raise StudyError(
            f"{where}: `comparators` must be arms of this study or of "
            f"{parent!r}, {list(study.arms) + list(other.arms)}. "
            f"Received: comparators={unknown!r}"
        )

    def settings(s):
        search = {k: v for k, v in s.search.items() if k != "max_trials"}
        fixed = {k: v for k, v in s.fixed.items() if k != "seeds"}
        scale = fixed.get("kernel_scale")
        if isinstance(scale, dict):
            # A table of one scale per arm: the same for the other study's
            # arms; the arms added may have their own.
            fixed["kernel_scale"] = {
                arm: value for arm, value in scale.items() if arm in other.arms
            }
        return s.family, search, fixed, list(s.grid)

    theirs = {c.name for c in other.conditions()}
    missing = [c.name for c in study.conditions() if c.name not in theirs]
    if settings(study) != settings(other) or missing:
        raise StudyError(
            f"{where}: a study that extends {parent!r} must have its family, "
            "[search] (but max_trials), [fixed] (but seeds, and the kernel "
            "scales of the arms it adds) and [grid] keys, and only "
            "conditions it has. Received: "
            + (f"conditions={missing}" if missing else "other settings")
        )
