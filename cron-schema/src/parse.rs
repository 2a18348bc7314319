// The grammar: filled in by the engine.
