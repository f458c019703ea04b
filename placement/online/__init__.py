"""Online scheduling: jobs arrive over time; a policy decides each slot (or at arrival)."""
