"""`qdebug serve`: an OpenAI-compatible chat-completions server that traces every request it answers."""
