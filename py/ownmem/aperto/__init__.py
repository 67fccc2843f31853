"""ApertoMemory draft-02, the format: keys (§9), payload, seal and open, trust, the .amem container, migration, context framing."""
