"""What the guard reports about a merge: conflicts, shadowing, DRA rules, effects and explanations."""
