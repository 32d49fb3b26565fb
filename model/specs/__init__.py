"""What is trained and on what: validated model, system and execution specs (the inputs)."""
