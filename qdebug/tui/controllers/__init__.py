"""The request screen's controllers: live runs, command verbs and replays, each with its own state."""
