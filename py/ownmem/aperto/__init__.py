"""The ApertoMemory format (draft-02): keys, payload, seal and open, trust, the `.amem` container,
migration, framing."""
