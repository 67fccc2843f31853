"""Search and recall: the words memories are matched on and the one ranking of them (pure)."""
